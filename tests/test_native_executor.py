"""The native executor's child process: parent-enforced time-outs that kill the whole process
group, the memory limit and its out-of-memory finding, and the SymCC adapter against the
contract-following command over TritonDSE."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from symfence.worker.executors.base import ExitKind, Task
from symfence.worker.executors.native import NativeExecutor
from symfence.worker.native.base import NativeOptions, RunKind
from tests.native_support import built, compile_c, needs_afl, needs_cc, needs_tritondse

pytestmark = [needs_tritondse, needs_cc]
CONTRACT = "{python} -m symfence.worker.native.symcc_tritondse {target}"


def run_task(ex: NativeExecutor, target: str, data: bytes, options: dict, bound: int = 0, limit_s: float = 90):
    ex.start(Task("a" * 64, "w" * 64, data, target, bound, options))
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        outcome = ex.wait(0.5)
        if outcome is not None:
            return outcome
    raise AssertionError("task did not finish")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_engine_oracle_task_reports_candidates_and_crash():
    with NativeExecutor() as ex:
        crash = run_task(ex, str(built() / "record"), b"SFRC\x42\xee\xff\xc0\x02\x42!!" + bytes(20), {})
        assert crash.status is ExitKind.CRASH and crash.error.splitlines()[-1].startswith("SIGSEGV")
        ok = run_task(ex, str(built() / "record"), bytes(32), {})
        assert ok.status is ExitKind.OK and ok.trace and ok.candidates
        assert all(c.trace and c.kind is ExitKind.OK for c in ok.candidates)
        assert ok.candidates[0].data[:4] == b"SFRC"


@needs_afl
def test_parent_kills_a_stuck_child_and_its_symcc_process_group(tmp_path):
    """The child is frozen (SIGSTOP) while a SymCC run sleeps: only the parent can end the task."""
    marker = tmp_path / "pid"
    script = tmp_path / "fake-symcc"
    script.write_text(f"#!/bin/sh\necho $$ > {marker}.tmp && mv {marker}.tmp {marker}\nsleep 300\n")
    script.chmod(0o755)
    opts = {"engine": "symcc", "oracle": "showmap", "symcc_command": str(script),
            "afl_target": str(built() / "record") + ".afl", "engine_timeout_s": 5.0}
    # (long enough that the child cannot end the SymCC run itself before the test freezes it)
    with NativeExecutor() as ex:
        ex.start(Task("a" * 64, "w" * 64, bytes(8), str(built() / "record"), 0, opts))
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            assert ex.wait(0.05) is None
        child = ex.child_pid
        os.kill(child, signal.SIGSTOP)  # the child can no longer enforce its own time-out
        sleeper = int(marker.read_text())
        t0 = time.monotonic()
        outcome = None
        while outcome is None and time.monotonic() - t0 < 30:
            outcome = ex.wait(0.2)
        assert outcome is not None and outcome.status is ExitKind.ERROR
        assert "overran" in outcome.error and outcome.stats["killed_by_parent"] == 1
        time.sleep(0.2)
        assert not alive(child) and not alive(sleeper)
        assert ex.child_pid != child  # a fresh child serves the next task


@needs_afl
def test_hanging_inputs_and_confirmation_reruns_are_not_explored(tmp_path):
    """On a hang the engine would only run into engine_timeout_s (a SymCC build runs the program);
    a confirmation re-run (bound past max_branches) wants the oracle's verdict, no candidates."""
    marker = tmp_path / "engine-ran"
    script = tmp_path / "fake-symcc"
    script.write_text(f"#!/bin/sh\ntouch {marker}\nsleep 300\n")
    script.chmod(0o755)
    opts = {"engine": "symcc", "oracle": "forkserver", "symcc_command": str(script), "input": "stdin",
            "afl_target": str(built() / "record") + ".afl", "engine_timeout_s": 60.0}
    with NativeExecutor() as ex:
        hang = run_task(ex, str(built() / "record"), b"SFRC\xd5\xee\x05\x10\x04\x00LOOP", opts)
        assert hang.status is ExitKind.HANG and not hang.candidates and hang.stats["not_explored"] == 1
        crash = run_task(ex, str(built() / "record"), b"SFRC\x42\xee\xff\xc0\x02\x42!!" + bytes(20), opts,
                         bound=1 << 31)
        assert crash.status is ExitKind.CRASH and crash.error.startswith("SIGSEGV") and crash.stats["not_explored"] == 1
        assert not marker.exists()
        ok = run_task(ex, str(built() / "record"), b"SFRC" + bytes(28), {**opts, "engine_timeout_s": 1.0})
        assert marker.exists() and "not_explored" not in ok.stats  # other inputs are explored


def test_memory_limit_makes_an_out_of_memory_finding(tmp_path):
    hog = compile_c(tmp_path, "memhog", r'''
#include <unistd.h>
int main(void) {
  unsigned char buf[16];
  long n = read(0, buf, sizeof buf);
  if (n < 1 || buf[0] != 'M') return 0;
  unsigned acc = 0;
  for (unsigned long i = 0; i < 100000000ul; i++) acc = acc * 31u + buf[i & 15];
  return (int)(acc & 1);
}
''')
    opts = {"mem_limit_mb": 260, "exec_timeout_s": 60.0, "engine_timeout_s": 60.0}
    from symfence.coordinator.outputs import FindingClass, finding_class
    with NativeExecutor() as ex:
        oom = run_task(ex, str(hog), b"M" * 16, opts)  # the input itself exhausts the engine
        assert oom.status is ExitKind.CRASH and oom.error.startswith("MemoryError: ")
        assert "over mem_limit_mb=260" in oom.error and oom.stats["oom"] == 1
        assert finding_class("crash", oom.error) is FindingClass.OOM
        ok = run_task(ex, str(hog), b"x" * 16, opts)  # ... and the same child goes on
        assert ok.status is ExitKind.OK
        hogs = [c for c in ok.candidates if c.data[:1] == b"M"]  # a candidate that does: a finding
        assert hogs and all(c.kind is ExitKind.CRASH and c.detail.startswith("MemoryError: ") for c in hogs)
        assert ok.stats["oom"] == len(hogs)


def test_symcc_adapter_against_the_contract_command(tmp_path):
    """SymccEngine drives `symcc_tritondse` exactly as it would a SymCC build: input file,
    fresh output dir, private coverage map that prunes already-covered branches next time."""
    from symfence.worker.native.symcc_engine import SymccEngine

    target = str(built() / "record")
    spawned: list[int] = []
    opts = NativeOptions.from_mapping({"engine": "symcc", "oracle": "showmap", "input": "file",
                                       "symcc_command": CONTRACT, "engine_timeout_s": 60.0})
    engine = SymccEngine(target, opts, work_dir=str(tmp_path), on_spawn=spawned.append)
    try:
        first = engine.explore(b"SFRC" + bytes(28), 0)
        assert first.own.kind is RunKind.OK and first.own.exit_code == 0  # the program's own exit
        assert first.candidates and all(c.bound is None for c in first.candidates)
        assert Path(engine.coverage_map).stat().st_size == 1 << 16
        engine.explore(first.candidates[0].data, 0)  # covers the branch that candidate flipped ...
        again = engine.explore(b"SFRC" + bytes(28), 0)
        assert len(again.candidates) < len(first.candidates)  # ... so the map prunes it now
        assert not [p for p in Path(engine._dir).iterdir() if p.name.startswith("out-")]
    finally:
        engine.close()
    # each run's process group was reported while alive, then cleared
    assert len(spawned) == 6 and spawned[1::2] == [0] * 3 and all(spawned[0::2])
    stdin_opts = NativeOptions.from_mapping({**{k: getattr(opts, k) for k in ("engine", "oracle", "symcc_command")},
                                             "input": "stdin"})
    engine = SymccEngine(target, stdin_opts, work_dir=str(tmp_path))
    try:  # stdin mode: no SYMCC_INPUT_FILE, the input (here one that crashes) arrives on stdin
        crash = engine.explore(b"SFRC\x42\xee\xff\xc0\x02\x42!!" + bytes(20), 0)
        assert crash.own.kind is RunKind.CRASH and crash.own.signal == signal.SIGSEGV
    finally:
        engine.close()
