"""The minimize executor over the engine seam: a real child per task (ChildExecutor,
``one_task_per_child``), typed childwire messages, the minimized input as the outcome's candidate."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from symfence.worker.engine_api import ExitKind, Outcome, Task
from symfence.worker.executors import make_executor
from symfence.worker.executors.minimize import MinimizeExecutor

ROOT = Path(__file__).resolve().parent.parent
CRASH = b"SYMF\x03\xef\xbe!" + bytes(range(40))  # examples.magic_header's bug, 8 bytes + noise


def _task(data: bytes, target: str, **own: object) -> Task:
    options = {"exec_timeout_s": 1.0, **{f"minimize_{k}": v for k, v in own.items()}}
    return Task("t" * 64, "w" * 64, data, target, 0, options)


def _finish(ex: MinimizeExecutor, limit_s: float = 60.0) -> Outcome:
    for _ in range(int(limit_s / 0.05)):
        if (outcome := ex.wait(0.05)) is not None:
            return outcome
    raise AssertionError(f"no outcome within {limit_s} s")


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ and the test's own targets resolve in the child
    monkeypatch.syspath_prepend(str(tmp_path))
    ex = make_executor("minimize")
    assert isinstance(ex, MinimizeExecutor)
    yield ex
    ex.close()


def test_a_crash_shrinks_to_its_minimal_input_in_a_fresh_child_per_task(executor):
    pids = []
    for _ in range(2):
        executor.start(_task(CRASH, "examples.magic_header:target", kind="crash", executor="concolic",
                             budget_s=20.0))
        pids.append(executor.child_pid)
        outcome = _finish(executor)
        assert outcome.status is ExitKind.CRASH, outcome.error
        (cand,) = outcome.candidates
        assert cand.data == CRASH[:8] and cand.kind is ExitKind.CRASH and "MagicHeaderBug" in cand.detail
        assert dict(outcome.stats) == {"minimized_from": len(CRASH), "minimized_to": 8, "afl_tmin": 0,
                                       "identity_mismatch": 0}
        assert executor.child_pid is None  # stopped after its task: no target state carries over
    assert pids[0] != pids[1] and None not in pids


def test_an_input_that_does_not_reproduce_is_an_answer_not_a_task_error(executor):
    """The minimizer's plain runs of a saved finding's input do not crash (a hang that depended
    on the machine's load, an engine's false claim): an OK result without a candidate, counted
    `not_reproduced`. As a task ERROR, the run summary said "9 of 52 tasks errored" of a native
    campaign whose only errors were these."""
    executor.start(_task(b"SYMF\x03", "examples.magic_header:target", kind="crash", executor="concolic"))
    outcome = _finish(executor)
    assert outcome.status is ExitKind.OK and not outcome.candidates, outcome.error
    assert outcome.stats == {"not_reproduced": 1}


def test_an_out_of_memory_input_is_minimized_under_the_campaigns_memory_limit(executor):
    # The replay that confirmed it ran with the engine's address-space limit; the minimizer ran
    # without one, so a big allocation succeeded there: "does not reproduce here (ok)".
    task = _task(b"M" + b"x" * 30, "tests.fuzzproc_targets:allocates", kind="crash", executor="fuzz",
                 budget_s=20.0)
    options = {**task.options, "rss_limit_mb": 300}
    executor.start(Task(task.token, task.work_id, task.data, task.target, 0, options))
    outcome = _finish(executor)
    assert outcome.status is ExitKind.CRASH, outcome.error
    (cand,) = outcome.candidates
    assert cand.data == b"M" and "MemoryError" in cand.detail


def test_an_input_that_ends_the_process_below_python_is_minimized_in_a_copy(executor, tmp_path):
    (tmp_path / "sf_min_exits.py").write_text(textwrap.dedent("""
        import ctypes
        def target(data):
            if data[:1] == b"E":
                ctypes.CDLL(None)._exit(7)  # below Python (os._exit is the target's crash: target_exit.py)
    """))
    executor.start(_task(b"E" + b"y" * 20, "sf_min_exits:target", kind="crash", executor="fuzz",
                         budget_s=20.0))
    outcome = _finish(executor)
    assert outcome.status is ExitKind.CRASH, outcome.error
    (cand,) = outcome.candidates
    assert cand.data == b"E" and "exited with status 7" in cand.detail


def test_a_minimizer_that_dies_is_an_error_and_a_bad_budget_never_reaches_a_child(executor, tmp_path):
    (tmp_path / "sf_min_dies.py").write_text(textwrap.dedent("""
        import ctypes
        ctypes.CDLL(None)._exit(7)  # at import, in the minimizer itself (not in a copy)
        def target(data):
            pass
    """))
    executor.start(_task(b"abc", "sf_min_dies:target", kind="crash", executor="concolic"))
    outcome = _finish(executor)
    assert outcome.status is ExitKind.ERROR and outcome.error == "the minimizer died (exit 7)"
    executor.start(_task(b"abc", "sf_min_dies:target", budget_s="soon"))
    assert executor.child_pid is None
    outcome = _finish(executor)
    assert outcome.status is ExitKind.ERROR and "soon" in outcome.error


def test_abort_kills_the_child(executor, tmp_path):
    (tmp_path / "sf_min_slow.py").write_text(textwrap.dedent("""
        import time
        def target(data):
            time.sleep(0.2)
            raise ValueError("slow")
    """))
    executor.start(_task(bytes(64), "sf_min_slow:target", kind="crash", executor="concolic", budget_s=30.0))
    assert executor.wait(1.0) is None
    pid = executor.child_pid
    assert pid is not None
    executor.abort()
    assert executor.child_pid is None and executor.wait(0.1) is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
