"""Native campaigns under real mpiexec: the planted bugs from zero bytes (TritonDSE, and SymCC's
adapter over the contract command), and AFL++ side by side through a sync directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Callable

import pytest

from tests.mpi_helpers import ROOT, Run, run_campaign, stop_when
from tests.native_support import HAVE_AFL, built, needs_afl, needs_cc, needs_tritondse

pytestmark = [pytest.mark.mpi, pytest.mark.heavy, needs_tritondse, needs_cc]


def native_cfg(targets: list[str], **options) -> dict:
    cfg = tomllib.loads((ROOT / "configs" / "native.toml").read_text())
    cfg["campaign"]["targets"] = targets
    cfg["campaign"]["duration_s"] = 300  # a cap: the tests stop on what they wait for
    cfg["native"]["options"].update(oracle="forkserver" if HAVE_AFL else "engine", **options)
    cfg["stats"] = {"interval_s": 0.5}
    # No minimization: these tests wait for findings, and a hang's minimization (each run lasts
    # exec_timeout_s) held a worker ~21 s, delaying the next find and the drain after the stop.
    # Minimization is tests/test_triage.py's (a campaign's findings minimized; the native cases
    # through bench_minimize); tests/test_triage_tools.py's native campaign runs with it.
    cfg["triage"] = {"minimize": False}
    return cfg


def replay(binary: Path, data: bytes) -> int:
    """Exit status of the plain build on one input (negative: killed by that signal)."""
    try:
        return subprocess.run([str(binary)], input=data, capture_output=True, timeout=2).returncode
    except subprocess.TimeoutExpired:
        return 999  # still running: a hang


def _key(path: str) -> str:
    """The `target:` part of a finding's file name for the native target at `path`."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", path)[:40]


def found(out: Path, crashes: list[str], hangs: list[str]) -> Callable[[], bool]:
    """Whether a crash of each target in `crashes` and a hang of each in `hangs` are saved (by
    target: two crash identities of one target are not one of each)."""
    def each(folder: str, targets: list[str]) -> bool:
        saved = {p.name.split("target:")[-1] for p in (out / folder).iterdir()} if (out / folder).is_dir() else set()
        return all(_key(t) in saved for t in targets)
    return lambda: each("crashes", crashes) and each("hangs", hangs)


def test_native_campaign_finds_each_planted_bug_from_zero_bytes(tmp_path):
    record, tlv = str(built() / "record"), str(built() / "tlv")
    # the search ends by itself ("work exhausted"), or once the three bugs are saved; the
    # duration is only a cap for a very loaded machine
    cfg = native_cfg([record, tlv])
    # The engine's own reach from zero bytes, without native mutation slices (opt-in; with
    # them: tests/test_native_slices.py and `python -m bench.bench_busy --finds N`).
    cfg["fuzz"] = {"native_slices": False}
    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=cfg["campaign"]["duration_s"] + 120,
                       on_start=stop_when(found(tmp_path / "out", [record, tlv], [record]),
                                          cfg["campaign"]["duration_s"]))
    assert run.code == 0, run.explain()
    assert "VIOLATED" not in run.stdout
    crashes = {p.name.split("target:")[1]: p for p in (run.out / "crashes").iterdir()}
    hangs = {p.name.split("target:")[1]: p for p in (run.out / "hangs").iterdir()}
    key = _key
    # each saved finding reproduces on the plain build: SIGSEGV, SIGABRT, and a hang
    assert replay(Path(record), crashes[key(record)].read_bytes()) == -11      # RecordChecksumBug
    assert replay(Path(tlv), crashes[key(tlv)].read_bytes()) == -6             # TlvDepthBug
    assert replay(Path(record), hangs[key(record)].read_bytes()) == 999        # RecordLoopBug
    # the crash identity: signal and frames of the plain build (gdb), parse() faulting in record
    assert ",sig:SIGSEGV-parse+0x" in crashes[key(record)].name and ",sig:SIGABRT-" in crashes[key(tlv)].name
    seeds = sorted((run.out / "queue").glob("*,seed,*"))
    assert [p.read_bytes() for p in seeds] == [bytes(32), bytes(32)]


def symcc_finds_record_bugs(tmp_path: Path, symcc_command: str, **options) -> Run:
    """A 3-rank campaign of the SymCC engine on examples/native/record, until its crash and its
    hang are saved: exactly one of each, the crash a SIGSEGV of the plain build."""
    record = str(built() / "record")
    cfg = native_cfg([record], engine="symcc", symcc_command=symcc_command, input="stdin", **options)
    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=cfg["campaign"]["duration_s"] + 120,
                       on_start=stop_when(found(tmp_path / "out", [record], [record]), cfg["campaign"]["duration_s"]))
    assert run.code == 0, run.explain()
    crashes = list((run.out / "crashes").iterdir())
    assert len(crashes) == 1 and replay(Path(record), crashes[0].read_bytes()) == -11
    assert len(list((run.out / "hangs").iterdir())) == 1
    return run


@needs_afl
def test_symcc_engine_through_the_contract_command_under_mpiexec(tmp_path):
    symcc_finds_record_bugs(tmp_path, "{python} -m symfence.worker.native.symcc_tritondse {target}",
                            engine_timeout_s=120.0)  # each run starts Python and TritonDSE


# A real SymCC build's compiler wrapper, when this machine has one: no registry we install from
# ships SymCC, so `make test` cannot; docs/native.md says how one was built and run here.
REAL_SYMCC = os.environ.get("SYMFENCE_SYMCC") or shutil.which("symcc")


@needs_afl
@pytest.mark.skipif(REAL_SYMCC is None, reason="no SymCC build (set SYMFENCE_SYMCC to its `symcc` compiler "
                    "wrapper, or put it on PATH): the SymCC engine is tested through the contract command")
def test_a_real_symcc_build_finds_the_crash_and_the_hang_under_mpiexec(tmp_path):
    """The SymCC engine with a real SymCC build of the target (QSYM backend: it writes its test
    cases to SYMCC_OUTPUT_DIR and prunes with SYMCC_AFL_COVERAGE_MAP), from zero bytes."""
    symcc_build = tmp_path / "record.symcc"
    made = subprocess.run([REAL_SYMCC, "-O1", "-g", "-o", str(symcc_build), str(ROOT / "examples/native/record.c")],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    run = symcc_finds_record_bugs(tmp_path, str(symcc_build))
    assert "task errors 0" in run.stdout and int(run.stats()["engine_generated"]) > 0, run.stdout[-2000:]


def afl_ids(queue: Path) -> list[int]:
    return sorted(int(p.name[3:9]) for p in queue.iterdir() if p.name.startswith("id:"))


def sync_origins(out: Path) -> list[tuple[str, bytes]]:
    db = sqlite3.connect(out / "journal.sqlite")
    rows = [(o, bytes(d)) for o, d in db.execute("SELECT origin, data FROM corpus") if o.startswith("sync:")]
    db.close()
    return rows


def corpus_data(out: Path) -> set[bytes]:
    db = sqlite3.connect(out / "journal.sqlite")
    data = {bytes(d) for (d,) in db.execute("SELECT data FROM corpus")}
    db.close()
    return data


def their_entries(queue: Path) -> dict[int, tuple[str, bytes]]:
    """AFL++'s own entries (not its copies of ours), by id."""
    return {int(p.name[3:9]): (p.name, p.read_bytes()) for p in queue.iterdir()
            if p.name.startswith("id:") and ",sync:symfence," not in p.name}


def events(out: Path, name: str) -> list[dict]:
    path = out / "logs" / "coordinator.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e.get("event") == name]


@needs_afl
def test_afl_side_by_side_import_export_and_resume(tmp_path):
    """symfence exports its queue as an AFL++ sync instance; on --resume it launches
    `afl-fuzz -S`, which imports that queue at start (AFL_IMPORT_FIRST), and symfence imports
    AFL++'s entries: each once, whole, under an origin naming the AFL++ id it was read from.
    AFL++ keeps finding entries until it is stopped, after symfence's last poll: a --resume
    imports those, and only those. Launched again, afl-fuzz resumes its queue (renumbered: a new
    session) and nothing is imported twice. AFL_DISABLE_TRIM keeps AFL++'s files as first written,
    so the bytes imported can be compared with the files (the trimming race is tests/test_aflsync.py's).
    Each step runs until what it needs has happened (Ctrl-C), not for a fixed time: the two runs
    with AFL++ stopped, until all it has is in the corpus (they ran their whole 5 s before)."""
    record = str(built() / "record")
    sync = tmp_path / "sync"
    out = tmp_path / "out"
    ours, theirs = sync / "symfence" / "queue", sync / "symfence-afl-0" / "queue"
    env = {"AFL_DISABLE_TRIM": "1"}
    cfg = native_cfg([record])
    cfg["afl"] = {"sync_dir": str(sync), "launch": 0, "import_interval_s": 0.5}

    def run(duration_s: float, launch: int, until: Callable[[], bool] | None = None, resume: bool = True):
        cfg["campaign"]["duration_s"] = duration_s
        cfg["afl"]["launch"] = launch
        done = run_campaign(tmp_path, cfg, ranks=2, timeout_s=duration_s + 150, out=out, env=env,
                            extra_args=["--resume"] if resume else [],
                            on_start=stop_when(until, duration_s) if until else None)
        assert done.code == 0, done.stderr[-3000:]
        origins = [o for o, _ in sync_origins(out)]
        assert len(set(origins)) == len(origins)  # no entry imported twice
        stats = done.stats()  # AFL++'s meaning: imported apart from found, over --resume too
        assert int(stats["corpus_imported"]) == len(origins), stats
        assert int(stats["corpus_found"]) + int(stats["corpus_imported"]) <= int(stats["corpus_count"])
        return dict(sync_origins(out))

    def all_of_theirs_in_the_corpus() -> Callable[[], bool]:
        """For a run with AFL++ stopped: every entry AFL++ has is in the corpus (imported now or
        before), and the importer has polled four times since this run started (so an entry
        imported twice would show); the run's duration is only a cap."""
        runs_before = len(events(out, "campaign.started"))

        def done() -> bool:
            starts = events(out, "campaign.started")
            if len(starts) <= runs_before or time.time() - starts[-1]["ts"] < 4 * cfg["afl"]["import_interval_s"]:
                return False
            try:
                have = corpus_data(out)
            except sqlite3.Error:  # the journal being written: not yet
                return False
            return all(data in have for _, data in their_entries(theirs).values())

        return done

    assert run(60, 0, lambda: len(afl_ids(ours)) >= 3, resume=False) == {}
    exported = afl_ids(ours)
    assert exported == list(range(len(exported))) and len(exported) >= 3  # contiguous ids
    assert not list((sync / "symfence" / ".tmp").iterdir())

    # AFL++ imports our entries and finds its own; stop once one of those is ours
    second = run(90, 1, lambda: any(",sync:symfence," in p.name for p in theirs.iterdir())
                 and any("op:sync_symfence-afl-0_" in p.name for p in (out / "queue").iterdir()))
    # AFL++ ran our entries and kept the ones interesting to it as id:...,sync:symfence,...
    assert [p for p in theirs.iterdir() if ",sync:symfence," in p.name]
    entries2 = their_entries(theirs)
    assert second and set(second) <= {f"sync:symfence-afl-0:{i:06d}" for i in entries2}
    for origin, data in second.items():  # whole files, from the AFL++ id the origin names
        assert entries2[int(origin[-6:])][1] == data
    assert not any(",sync:" in p.name for p in ours.iterdir())  # AFL++'s entries are not sent back
    assert afl_ids(ours) == list(range(len(afl_ids(ours))))
    # what AFL++ had when symfence stopped is now imported, or was a copy of an entry we had
    # (its seed); entries AFL++ found after symfence's last poll are imported on --resume
    tail = {i for i, (_, data) in entries2.items() if f"sync:symfence-afl-0:{i:06d}" not in second
            and data not in corpus_data(out)}
    assert not tail or min(tail) > max(int(o[-6:]) for o in second)  # contiguous cursor: nothing skipped

    third = run(5, 0, all_of_theirs_in_the_corpus())  # AFL++ is not running: a cursor that survives --resume
    assert set(second) <= set(third)
    assert {int(o[-6:]) for o in set(third) - set(second)} == tail
    assert all(data in corpus_data(out) for _, data in entries2.values())  # all AFL++ had, imported

    # afl-fuzz again on its own directory: AFL_AUTORESUME renumbers its queue (a new session);
    # stop once it has re-added all of it (its _resume/ directory is gone)
    count2 = len(list(theirs.iterdir()))
    fourth = run(60, 1, lambda: bool(events(out, "afl.session_changed")) and not (theirs.parent / "_resume").exists()
                 and len(list(theirs.iterdir())) >= count2)
    log = (out / "logs" / "afl-fuzz-0.log").read_text(errors="replace")
    assert "Resuming" in log, log[-2000:]
    assert [e["instance"] for e in events(out, "afl.session_changed")] == ["symfence-afl-0"]
    entries4 = their_entries(theirs)
    assert {data for _, data in entries2.values()} <= {data for _, data in entries4.values()}  # kept
    assert set(third) <= set(fourth)
    for origin in set(fourth) - set(third):  # only new finds, from the new session
        assert origin.startswith("sync:symfence-afl-0@1:") and fourth[origin] == entries4[int(origin[-6:])][1]

    fifth = run(5, 0, all_of_theirs_in_the_corpus())  # the session is remembered even if it imported nothing new so far
    assert set(fourth) <= set(fifth)
    assert all(o.startswith("sync:symfence-afl-0@1:") for o in set(fifth) - set(fourth))
    assert all(data in corpus_data(out) for _, data in their_entries(theirs).values())
