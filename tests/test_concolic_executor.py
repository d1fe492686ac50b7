"""Tests for ConcolicExecutor: the child process isolates crashes, hangs, deaths and aborts."""

from __future__ import annotations

import itertools
import os
import signal
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from symfence.worker.concolic.engine import ConcolicEngine
from symfence.worker.executors.base import ExitKind, Outcome, Task
from symfence.worker.executors.concolic import ConcolicExecutor, _Phase

_counter = itertools.count()

TARGETS = """
import ctypes, os, time

def crash(data):
    if data[0] == 9:
        raise ValueError("boom")

def spin(data):
    if data[0] == 1:
        while True:
            pass

def stubborn(data):
    while True:
        try:
            time.sleep(10)
        except BaseException:
            continue

def sleepy(data):
    time.sleep(float(data[0]))

def die(data):
    if data[0] == 7:  # C code ending the process (a Python os._exit is a crash at its call: target_exit.py)
        ctypes.CDLL(None)._exit(3)

def hog(data):
    if data[0] == 5:
        buffer = bytearray(10 << 30)  # 10 GiB, far past the memory limit
        buffer[-1] = 1
"""


@pytest.fixture
def targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Module name of a fresh copy of TARGETS on sys.path (the child gets sys.path per task)."""
    name = f"sf_executor_targets_{os.getpid()}_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(TARGETS))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.fixture
def executor() -> Iterator[ConcolicExecutor]:
    with ConcolicExecutor() as ex:
        yield ex


def run(ex: ConcolicExecutor, target: str, data: bytes, limit_s: float = 20.0,
        **options: object) -> Outcome:
    ex.start(Task("token", "work", data, target, 0, options))
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        outcome = ex.wait(0.05)
        if outcome is not None:
            return outcome
    raise AssertionError(f"no outcome within {limit_s} s")


def test_task_results_match_the_in_process_engine(executor: ConcolicExecutor) -> None:
    task_data = b"SYMF\x03\x00\x00\x00"
    outcome = run(executor, "examples.magic_header:target", task_data)
    local = ConcolicEngine().run_task(Task("t", "work", task_data, "examples.magic_header:target"))
    assert outcome.status is ExitKind.OK
    assert dict(outcome.trace) == dict(local.trace)  # site ids are stable across processes
    assert [c.data for c in outcome.candidates] == [c.data for c in local.candidates]
    assert outcome.execs == 2 + len(outcome.candidates) and outcome.wall_s > 0


def test_crash_of_the_input_and_of_a_child(executor: ConcolicExecutor, targets: str) -> None:
    crashed = run(executor, f"{targets}:crash", b"\x09")
    assert crashed.status is ExitKind.CRASH and "ValueError: boom" in crashed.error
    ok = run(executor, f"{targets}:crash", b"\x00")
    assert ok.status is ExitKind.OK
    assert [(c.data, c.kind) for c in ok.candidates] == [(b"\x09", ExitKind.CRASH)]
    assert "ValueError: boom" in ok.candidates[0].detail


def test_python_infinite_loop_is_a_hang_and_the_child_survives(executor: ConcolicExecutor,
                                                              targets: str) -> None:
    pid = executor.child_pid
    hung = run(executor, f"{targets}:spin", b"\x01", exec_timeout_s=0.3)
    # CPU seconds, which load does not stretch (the wall clock went past 2 s once in CI)
    assert hung.status is ExitKind.HANG and hung.cpu_s < 2.0, hung
    child_hang = run(executor, f"{targets}:spin", b"\x00", exec_timeout_s=0.3)
    assert [(c.data, c.kind) for c in child_hang.candidates] == [(b"\x01", ExitKind.HANG)]
    assert executor.child_pid == pid  # the time limit fired inside the child, nothing was killed
    assert run(executor, "examples.tlv:target", b"\x00").status is ExitKind.OK


def test_a_target_that_swallows_the_time_limit_is_killed_by_the_backstop(
        executor: ConcolicExecutor, targets: str) -> None:
    pid = executor.child_pid
    start = time.monotonic()
    hung = run(executor, f"{targets}:stubborn", b"\x00", exec_timeout_s=0.2)
    assert hung.status is ExitKind.HANG and "killed" in hung.error
    assert time.monotonic() - start < 3.0
    assert executor.child_pid != pid
    assert run(executor, "examples.tlv:target", b"\x00").status is ExitKind.OK


def test_child_death_during_the_input_or_a_replay(executor: ConcolicExecutor, targets: str) -> None:
    died = run(executor, f"{targets}:die", b"\x07")
    assert died.status is ExitKind.CRASH and "exited with status 3" in died.error
    replay = run(executor, f"{targets}:die", b"\x00")
    assert replay.status is ExitKind.OK
    assert [(c.data, c.kind, c.bound) for c in replay.candidates] == [(b"\x07", ExitKind.CRASH, 1)]
    assert "died" in replay.candidates[0].detail
    assert run(executor, "examples.tlv:target", b"\x00").status is ExitKind.OK


def test_child_killed_from_outside_then_next_task_works(executor: ConcolicExecutor,
                                                        targets: str) -> None:
    executor.start(Task("token", "work", b"\x05", f"{targets}:sleepy", 0, {"exec_timeout_s": 10.0}))
    deadline = time.monotonic() + 30  # until the child runs the input (start-up is slow under load)
    while executor._running.phase is not _Phase.INPUT and time.monotonic() < deadline:
        assert executor.wait(0.05) is None
    os.kill(executor.child_pid, signal.SIGKILL)
    outcome = executor.wait(5.0)
    assert outcome is not None and outcome.status is ExitKind.CRASH
    assert "SIGKILL" in outcome.error
    os.kill(executor.child_pid, signal.SIGKILL)  # also while idle
    time.sleep(0.1)
    assert run(executor, "examples.magic_header:target", b"\x00").status is ExitKind.OK


def test_abort_is_quick_and_wait_returns_none_afterwards(executor: ConcolicExecutor,
                                                        targets: str) -> None:
    executor.start(Task("token", "work", b"\x05", f"{targets}:sleepy", 0, {"exec_timeout_s": 10.0}))
    assert executor.wait(0.2) is None
    pid = executor.child_pid
    start = time.monotonic()
    executor.abort()
    assert time.monotonic() - start < 1.0
    assert executor.wait(0.1) is None
    assert executor.child_pid != pid
    assert run(executor, "examples.checksum:target", b"\x00").status is ExitKind.OK


def test_wait_honours_its_timeout(executor: ConcolicExecutor, targets: str) -> None:
    executor.start(Task("token", "work", b"\x02", f"{targets}:sleepy", 0, {"exec_timeout_s": 10.0}))
    for timeout in (0.0, 0.05, 0.25):
        start = time.monotonic()
        assert executor.wait(timeout) is None
        assert timeout <= time.monotonic() - start < timeout + 0.2
    executor.abort()


def test_bad_options_and_targets_are_errors_and_double_start_is_refused(
        executor: ConcolicExecutor) -> None:
    bad = run(executor, "examples.tlv:target", b"", exec_timeout_s="soon")
    assert bad.status is ExitKind.ERROR and "exec_timeout_s" in bad.error
    missing = run(executor, "no_such_module_abc:target", b"")
    assert missing.status is ExitKind.ERROR and "no_such_module_abc" in missing.error
    executor.start(Task("token", "work", b"\x00", "examples.tlv:target"))
    with pytest.raises(RuntimeError):
        executor.start(Task("token", "work", b"\x00", "examples.tlv:target"))
    assert run_wait(executor).status is ExitKind.OK


def run_wait(ex: ConcolicExecutor) -> Outcome:
    for _ in range(400):
        outcome = ex.wait(0.05)
        if outcome is not None:
            return outcome
    raise AssertionError("no outcome")


def test_close_stops_the_child() -> None:
    ex = ConcolicExecutor()
    pid = ex.child_pid
    assert run(ex, "examples.magic_header:target", b"\x00").status is ExitKind.OK
    ex.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(RuntimeError):
        ex.start(Task("token", "work", b"", "examples.tlv:target"))


def test_a_huge_allocation_is_an_oom_finding_not_a_hang(executor: ConcolicExecutor, targets: str) -> None:
    """RLIMIT_AS in the child (memory_limit_mb): the allocation fails at once with MemoryError,
    the outcome is a crash classed as out-of-memory, and the child survives it."""
    from symfence.coordinator.outputs import FindingClass, finding_class

    pid = executor.child_pid
    outcome = run(executor, f"{targets}:hog", b"\x05", exec_timeout_s=5.0, memory_limit_mb=1024)
    assert outcome.status is ExitKind.CRASH, outcome
    assert outcome.error.strip().splitlines()[-1] == "MemoryError"
    assert finding_class("crash", outcome.error) is FindingClass.OOM
    assert executor.child_pid == pid
    child = run(executor, f"{targets}:hog", b"\x00", memory_limit_mb=1024)  # a child input hits it
    oom = [c for c in child.candidates if c.kind is ExitKind.CRASH]
    assert oom and finding_class("crash", oom[0].detail) is FindingClass.OOM
