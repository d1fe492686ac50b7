"""Both stages under real mpiexec: a fuzz slice end to end, a hybrid campaign on plistlib that
keeps going and keeps finding (finds made from finds), and real-trace edges
from both stages' inputs."""

from __future__ import annotations

import csv
import importlib
import sqlite3
from itertools import pairwise

import pytest

from symfence.coordinator.journal import Journal, JournalError
from symfence.coordinator.stats import read_stats
from symfence.protocol.coverage import CoverageMap
from symfence.worker.realtrace.tracer import ArcTracer, load_callable, resolve_include
from tests.mpi_helpers import crash_files, run_campaign, stop_when

pytestmark = [pytest.mark.mpi, pytest.mark.heavy]


def _cfg(executor: str, targets: list[str], duration_s: float, **sections) -> dict:
    cfg = {
        "campaign": {"executor": executor, "targets": targets, "duration_s": duration_s},
        "dispatch": {"depth": 2, "drain_timeout_s": 20, "stop_timeout_s": 10},
        "workers": {"heartbeat_s": 0.5, "lost_after_s": 60},
        "fuzz": {"slice_s": 2.0, "exec_timeout_s": 0.5},
        "concolic": {"options": {"exec_timeout_s": 0.5, "max_candidates": 32}},
        "stats": {"interval_s": 0.5},
    }
    for name, table in sections.items():
        cfg.setdefault(name, {}).update(table)
    return cfg


def _queue(out):
    return sorted(p for p in (out / "queue").iterdir() if not p.name.startswith("."))


def _real_edges(target: str, data: bytes) -> dict[int, int]:
    module, fn = load_callable(target)
    return ArcTracer(resolve_include([], module)).run(fn, data, 2.0).trace


def test_fuzz_slice_end_to_end(tmp_path):
    target = "tests.hybrid_targets:shallow"
    out = tmp_path / "out"

    def found() -> bool:  # the crash saved and a kept input in the queue: stop (6 s at most)
        return bool(crash_files(out, "ShallowBug")) and any("op:fuzz" in p.name for p in _queue(out))

    run = run_campaign(tmp_path, _cfg("fuzz", [target], 6), ranks=2, timeout_s=120, on_start=stop_when(found))
    assert run.code == 0, run.explain()
    assert "work exhausted" not in run.stdout  # a fuzz stage never runs out of work
    s = run.stats()
    assert int(s["committed"]) >= 1 and int(s["quarantined_results"]) == 0
    assert int(s["fuzz_execs"]) > 0 and int(s["concolic_execs"]) == 0
    fuzz_entries = [p for p in _queue(run.out) if "op:fuzz" in p.name]
    assert fuzz_entries, [p.name for p in _queue(run.out)]
    crashes = list((run.out / "crashes").iterdir())
    assert len(crashes) == 1 and "ShallowBug" in crashes[0].name
    module = importlib.import_module("tests.hybrid_targets")
    with pytest.raises(module.ShallowBug):
        module.shallow(crashes[0].read_bytes())  # the saved input really crashes the plain target
    assert "VIOLATED" not in run.stdout


def _chains(out) -> tuple[dict, list]:
    """The journal's corpus by queue id, and its longest chain of finds, each made from the one before."""
    journal = Journal.read_only(out / "journal.sqlite")
    try:
        entries = {entry.queue_id: entry for entry in journal.iter_corpus()}
    finally:
        journal.close()

    def chain(entry):
        found = [entry]
        while found[-1].parent in entries and entries[found[-1].parent].origin != "seed":
            found.append(entries[found[-1].parent])
        return found

    return entries, max((chain(e) for e in entries.values() if e.origin != "seed"), key=len, default=[])


def test_hybrid_campaign_on_plistlib_keeps_going_and_grows(tmp_path):
    targets = ["tests.hybrid_targets:plist", "examples.magic_header:target"]
    # Up to 18 s: with the long-lived fuzz process the first turn (2 s) brings most of plistlib's
    # shallow edges at once; the engine finished its 4-find chain below in 5-9 s of the 18. The
    # campaign is stopped (Ctrl-C) once what the test is about has happened, so it costs that, not
    # the whole budget. The share is fixed at half: this is about finds made from the other stage's
    # finds, not the auto share (test_hybrid_stages.py), which gives the engine at most a quarter;
    # with that, under two CPU hogs the engine's chain below was 2 finds long in 1 of 2 runs. Without
    # the library's constants in the fuzzer's dictionary (fuzz.library_dict): magic_header's magic,
    # version and flags would reach the fuzzer from the start, not from the engine's finds.
    cfg = _cfg("hybrid", targets, 18, fuzz={"share": 0.5, "library_dict": False})

    def grown() -> bool:
        s = read_stats(tmp_path / "out" / "fuzzer_stats")
        if int(s.get("fuzz_edges_first", 0)) == 0 or int(s.get("concolic_edges_first", 0)) == 0:
            return False
        try:
            return len(_chains(tmp_path / "out")[1]) >= 3
        except (JournalError, sqlite3.Error):  # the journal as it is being written: not yet
            return False

    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=180, on_start=stop_when(grown))
    assert run.code == 0, run.explain()
    # A hybrid campaign never runs out of work: the budget or the Ctrl-C ends it.
    assert "work exhausted" not in run.stdout
    assert "campaign finished: duration reached" in run.stdout or "campaign finished: signal" in run.stdout
    s = run.stats()
    assert int(s["fuzz_execs"]) > 0 and int(s["concolic_execs"]) > 0
    assert int(s["fuzz_new_inputs"]) > 0 and int(s["concolic_new_inputs"]) > 0
    assert int(s["dictionary_tokens"]) > 0  # magic_header's b"SYMF", b"\xbe\xef", ... for the fuzzer
    # Each stage was the first to reach some edges (not only the other's finds again).
    assert int(s["fuzz_edges_first"]) > 0 and int(s["concolic_edges_first"]) > 0, s
    with (run.out / "plot_data").open() as fh:
        rows = list(csv.reader(fh))
    header, rows = [h.strip().lstrip("# ") for h in rows[0]], rows[1:]
    edges = [int(r[header.index("edges_found")]) for r in rows]
    assert len(rows) >= 3 and edges == sorted(edges) and edges[-1] > 0, edges

    # One yardstick: every queue entry of either stage has its real (plain-replay) edges in the map.
    journal = Journal.read_only(run.out / "journal.sqlite")
    cov = CoverageMap.from_bytes(journal.coverage())
    entries, longest = _chains(run.out)
    by_origin: dict[str, int] = {}
    for entry in entries.values():
        real = _real_edges(entry.target, entry.data)
        assert real, entry
        assert all(cov.seen[i] for i in real), (entry.origin, entry.data[:40])
        by_origin[entry.origin] = by_origin.get(entry.origin, 0) + 1
    assert by_origin.get("fuzz") and by_origin.get("concolic"), by_origin

    # The hybrid keeps finding: finds are made from finds. magic_header's bug sits behind checks in
    # a row (length, magic, version, flags), each find opening the next, so a chain of 3 finds, each
    # made from the one before and committed after it with new edges, takes 3 rounds of commit,
    # dispatch and solve; a burst of finds in the first turns cannot make it. (Edge growth after a
    # point in time cannot be asked for: the long-lived fuzz stage's first turn brings most of
    # plistlib's shallow edges, and in 1 of 4 runs here it found nothing later.)
    described = [(e.origin, round(e.found_s, 2), e.new_bits, e.data[:12]) for e in longest]
    assert len(longest) >= 3, described
    assert all(e.new_bits > 0 for e in longest), described
    assert all(child.found_s > parent.found_s for child, parent in pairwise(longest)), described
    assert "VIOLATED" not in run.stdout
