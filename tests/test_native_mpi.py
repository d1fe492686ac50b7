"""Native campaigns under real mpiexec: the planted bugs from zero bytes (TritonDSE, and SymCC's
adapter over the contract command), and AFL++ side by side through a sync directory."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.mpi_helpers import ROOT, run_campaign
from tests.native_support import HAVE_AFL, built, needs_afl, needs_cc, needs_tritondse

pytestmark = [pytest.mark.mpi, needs_tritondse, needs_cc]


def native_cfg(targets: list[str], **options) -> dict:
    cfg = tomllib.loads((ROOT / "configs" / "native.toml").read_text())
    cfg["campaign"]["targets"] = targets
    cfg["campaign"]["duration_s"] = 90
    cfg["native"]["options"].update(oracle="forkserver" if HAVE_AFL else "engine", **options)
    cfg["stats"] = {"interval_s": 0.5}
    return cfg


def replay(binary: Path, data: bytes) -> int:
    """Exit status of the plain build on one input (negative: killed by that signal)."""
    try:
        return subprocess.run([str(binary)], input=data, capture_output=True, timeout=2).returncode
    except subprocess.TimeoutExpired:
        return 999  # still running: a hang


def test_native_campaign_finds_each_planted_bug_from_zero_bytes(tmp_path):
    record, tlv = str(built() / "record"), str(built() / "tlv")
    run = run_campaign(tmp_path, native_cfg([record, tlv]), ranks=3, timeout_s=200)
    assert run.code == 0, run.stderr[-3000:]
    assert "VIOLATED" not in run.stdout
    crashes = {p.name.split("target:")[1]: p for p in (run.out / "crashes").iterdir()}
    hangs = {p.name.split("target:")[1]: p for p in (run.out / "hangs").iterdir()}
    key = lambda path: re.sub(r"[^A-Za-z0-9_.-]", "_", path)[:40]
    # each saved finding reproduces on the plain build: SIGSEGV, SIGABRT, and a hang
    assert replay(Path(record), crashes[key(record)].read_bytes()) == -11      # RecordChecksumBug
    assert replay(Path(tlv), crashes[key(tlv)].read_bytes()) == -6             # TlvDepthBug
    assert replay(Path(record), hangs[key(record)].read_bytes()) == 999        # RecordLoopBug
    assert ",sig:SIGSEGV," in crashes[key(record)].name and ",sig:SIGABRT," in crashes[key(tlv)].name
    seeds = sorted((run.out / "queue").glob("*,seed,*"))
    assert [p.read_bytes() for p in seeds] == [bytes(32), bytes(32)]


@needs_afl
def test_symcc_engine_through_the_contract_command_under_mpiexec(tmp_path):
    record = str(built() / "record")
    cfg = native_cfg([record], engine="symcc",
                     symcc_command="{python} -m symfence.worker.native.symcc_tritondse {target}",
                     input="stdin")
    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=200)
    assert run.code == 0, run.stderr[-3000:]
    crashes = list((run.out / "crashes").iterdir())
    assert len(crashes) == 1 and replay(Path(record), crashes[0].read_bytes()) == -11
    assert len(list((run.out / "hangs").iterdir())) == 1


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
    lines = (out / "logs" / "coordinator.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == name]


@needs_afl
def test_afl_side_by_side_import_export_and_resume(tmp_path):
    """symfence exports its queue as an AFL++ sync instance; on --resume it launches
    `afl-fuzz -S`, which imports that queue at start (AFL_IMPORT_FIRST), and symfence imports
    AFL++'s entries: each once, whole, under an origin naming the AFL++ id it was read from.
    AFL++ keeps finding entries until it is stopped, after symfence's last poll: a --resume
    imports those, and only those. Launched again, afl-fuzz resumes its queue (renumbered: a new
    session) and nothing is imported twice. AFL_DISABLE_TRIM keeps AFL++'s files as first written,
    so the bytes imported can be compared with the files (the trimming race is tests/test_aflsync.py's)."""
    record = str(built() / "record")
    sync = tmp_path / "sync"
    env = {"AFL_DISABLE_TRIM": "1"}
    cfg = native_cfg([record])
    cfg["campaign"]["duration_s"] = 8
    cfg["afl"] = {"sync_dir": str(sync), "launch": 0, "import_interval_s": 0.5}
    first = run_campaign(tmp_path, cfg, ranks=2, timeout_s=120, env=env)
    assert first.code == 0, first.stderr[-3000:]
    out = first.out
    ours, theirs = sync / "symfence" / "queue", sync / "symfence-afl-0" / "queue"
    exported = afl_ids(ours)
    assert exported == list(range(len(exported))) and len(exported) >= 3  # contiguous ids
    assert not list((sync / "symfence" / ".tmp").iterdir())
    assert sync_origins(out) == []

    def resume(duration_s: float, launch: int):
        cfg["campaign"]["duration_s"] = duration_s
        cfg["afl"]["launch"] = launch
        run = run_campaign(tmp_path, cfg, ranks=2, timeout_s=150, extra_args=["--resume"], out=out, env=env)
        assert run.code == 0, run.stderr[-3000:]
        origins = [o for o, _ in sync_origins(out)]
        assert len(set(origins)) == len(origins)  # no entry imported twice
        return dict(sync_origins(out))

    second = resume(15, 1)
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

    third = resume(3, 0)  # AFL++ is not running: a cursor that survives --resume
    assert set(second) <= set(third)
    assert {int(o[-6:]) for o in set(third) - set(second)} == tail
    assert all(data in corpus_data(out) for _, data in entries2.values())  # all AFL++ had, imported

    fourth = resume(6, 1)  # afl-fuzz again on its own directory: AFL_AUTORESUME renumbers its queue
    log = (out / "logs" / "afl-fuzz-0.log").read_text(errors="replace")
    assert "Resuming" in log, log[-2000:]
    assert [e["instance"] for e in events(out, "afl.session_changed")] == ["symfence-afl-0"]
    entries4 = their_entries(theirs)
    kept = {data for _, data in entries4.values()}
    assert {data for _, data in entries2.values()} <= kept | corpus_data(out)  # AFL++ kept its queue
    assert set(third) <= set(fourth)
    for origin in set(fourth) - set(third):  # only new finds, from the new session
        assert origin.startswith("sync:symfence-afl-0@1:") and fourth[origin] == entries4[int(origin[-6:])][1]

    fifth = resume(3, 0)  # the session is remembered even if it imported nothing new so far
    assert set(fourth) <= set(fifth)
    assert all(o.startswith("sync:symfence-afl-0@1:") for o in set(fifth) - set(fourth))
    assert all(data in corpus_data(out) for _, data in their_entries(theirs).values())
