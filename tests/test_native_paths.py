"""A native target named by a path without a slash (``tlv``: the file in the working directory)
runs in every runner: not looked up on PATH (``protocol.execpath.runnable``, the one rule)."""

from __future__ import annotations

import shutil

import pytest

from symfence.protocol.crashid import identity_from_detail
from symfence.protocol.execpath import runnable
from symfence.worker.native.base import RunKind
from symfence.worker.native.forkserver import ForkserverOracle, dumped_map_size
from symfence.worker.native.plain import run_plain
from symfence.worker.native.showmap import ShowmapOracle
from symfence.worker.triage.minimize_child import afl_tmin
from symfence.worker.triage.symbolize import native_detail, run_once
from tests.native_support import built, needs_afl, needs_cc

pytestmark = needs_cc

CRASH = b"SFRC\x42\xee\xff\xc0\x02\x42!!"  # examples/native/record.c: a wild write (SIGSEGV)


@pytest.fixture
def here(tmp_path, monkeypatch):
    """The example builds copied into a fresh working directory, which the test enters."""
    for name in ("record", "record.afl"):
        if (built() / name).exists():
            shutil.copy2(built() / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no '.' on PATH: a bare name must not need it
    return tmp_path


def test_runnable_is_the_one_rule(here):
    assert runnable("record") == str(here / "record")
    assert runnable("./record") == str(here / "record")
    assert runnable("missing") == "missing"  # not a file here: left to the runner to report
    assert runnable("true") == "true"  # a command on PATH stays one


def test_plain_runners_take_a_bare_name(here):
    code, _ = run_once("record", CRASH)
    assert code < 0
    assert run_plain("record", CRASH).verdict.value == "crashed"
    if shutil.which("gdb"):
        ident = identity_from_detail(native_detail("record", CRASH))
        assert ident.crash_type == "SIGSEGV" and ident.frames, ident


@needs_afl
def test_afl_runners_take_a_bare_name(here):
    assert dumped_map_size("record.afl", {}) > 0  # was: FileNotFoundError (a PATH lookup)
    fsrv = ForkserverOracle("record.afl", exec_timeout_s=0.5)
    showmap = ShowmapOracle("record.afl", exec_timeout_s=0.5)
    try:
        ok, crash = fsrv.run(b"x"), fsrv.run(CRASH)
        assert ok.kind is RunKind.OK and ok.trace
        assert crash.kind is RunKind.CRASH
        assert showmap.run(CRASH).kind is RunKind.CRASH
        assert showmap.run(b"x").trace == ok.trace
    finally:
        fsrv.close()
        showmap.close()
    smaller = afl_tmin("record.afl", CRASH + b"padding" * 4, "stdin", 0.5, budget_s=20)
    assert smaller is not None and len(smaller) < len(CRASH) + 28
