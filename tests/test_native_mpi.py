"""Native campaigns under real mpiexec: the planted bugs from zero bytes (TritonDSE, and SymCC's
adapter over the contract command), and AFL++ side by side through a sync directory."""

from __future__ import annotations

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


@needs_afl
@pytest.mark.xfail(reason='fails intermittently in a clean-clone CI run (AFL++ sync ids after resume differ); under investigation', strict=False)
def test_afl_side_by_side_import_export_and_resume(tmp_path):
    """symfence exports its queue as an AFL++ sync instance; on --resume it launches
    `afl-fuzz -S`, which imports that queue at start (AFL_IMPORT_FIRST), and symfence imports
    AFL++'s new entries; a further --resume imports nothing twice (the cursor is the journal)."""
    record = str(built() / "record")
    sync = tmp_path / "sync"
    cfg = native_cfg([record])
    cfg["campaign"]["duration_s"] = 8
    cfg["afl"] = {"sync_dir": str(sync), "launch": 0, "import_interval_s": 0.5}
    first = run_campaign(tmp_path, cfg, ranks=2, timeout_s=120)
    assert first.code == 0, first.stderr[-3000:]
    ours, theirs = sync / "symfence" / "queue", sync / "symfence-afl-0" / "queue"
    exported = afl_ids(ours)
    assert exported == list(range(len(exported))) and len(exported) >= 3  # contiguous ids
    assert not list((sync / "symfence" / ".tmp").iterdir())

    cfg["campaign"]["duration_s"] = 20
    cfg["afl"]["launch"] = 1
    second = run_campaign(tmp_path, cfg, ranks=2, timeout_s=120, extra_args=["--resume"], out=first.out)
    assert second.code == 0, second.stderr[-3000:]
    # AFL++ ran our entries and kept the ones interesting to it as id:...,sync:symfence,...
    assert [p for p in theirs.iterdir() if ",sync:symfence," in p.name]
    db = sqlite3.connect(first.out / "journal.sqlite")
    imported = [o for (o,) in db.execute("SELECT origin FROM corpus") if o.startswith("sync:symfence-afl-0:")]
    db.close()
    assert imported and len(set(imported)) == len(imported)
    assert not any(",sync:" in p.name for p in ours.iterdir())  # AFL++'s entries are not sent back
    assert afl_ids(ours) == list(range(len(afl_ids(ours))))

    cfg["campaign"]["duration_s"] = 3
    cfg["afl"]["launch"] = 0
    third = run_campaign(tmp_path, cfg, ranks=2, timeout_s=120, extra_args=["--resume"], out=first.out)
    assert third.code == 0, third.stderr[-3000:]
    db = sqlite3.connect(first.out / "journal.sqlite")
    after = [o for (o,) in db.execute("SELECT origin FROM corpus") if o.startswith("sync:symfence-afl-0:")]
    db.close()
    assert sorted(after) == sorted(imported)  # remembered across --resume: nothing re-imported
