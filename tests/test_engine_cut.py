"""An engine task ends early on request (``end_turn``: a claim's re-run waits on this worker),
with what it found so far, and the child goes on serving: the real concolic child, a real target."""

from __future__ import annotations

import itertools
import os
import textwrap
import time
from pathlib import Path

import pytest

from symfence.worker.engine_api import ExitKind, Task, Turns
from symfence.worker.executors import make_executor
from symfence.worker.executors.concolic import ConcolicExecutor

TARGET = '''
import time


def stuck(data):
    time.sleep(30)  # a task that cannot stop itself (as a z3 call that ignores its interrupt)


def many_branches(data):
    time.sleep(0.02)  # every execution (and each child's replay) costs 20 ms
    count = 0
    for b in data:
        if b == 0x41:
            count += 1
'''
_counter = itertools.count()


@pytest.fixture
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"sf_cut_target_{os.getpid()}_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(TARGET))
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{name}:many_branches"


def _wait(ex, limit_s: float):
    deadline = time.monotonic() + limit_s
    while (outcome := ex.wait(0.05)) is None:
        assert time.monotonic() < deadline, f"no outcome within {limit_s} s"
    return outcome


@pytest.mark.parametrize("wrapped", [False, True], ids=["child", "traced"])
def test_an_engine_task_cut_short_answers_with_its_children_so_far(target: str, wrapped: bool) -> None:
    # 150 branches, a child each (the cap raised): ~3 s of replays alone if it ran to the end
    options = FULL
    ex = make_executor("concolic") if wrapped else ConcolicExecutor()
    try:
        assert isinstance(ex, Turns)
        assert not ex.end_turn()  # nothing running
        ex.start(Task("t" * 64, "w" * 64, b"\x00" * 150, target, 0, options))
        deadline = time.monotonic() + 60
        while not ex.end_turn():  # once the child has accepted the task
            assert ex.wait(0.05) is None and time.monotonic() < deadline
        early = _wait(ex, 30.0)
        assert early.status is ExitKind.OK and early.stats.get("cut_short") == 1
        assert len(early.candidates) < 150
        # It hands back the branches it did not try: run on from there, the two runs' children
        # are every child of a whole run (the campaign's continuation, coordinator/workkinds.py).
        assert early.resume_at is not None and early.resume_at <= len(early.candidates) + 1
        # The same child goes on, and nothing cuts it now.
        if not wrapped:
            ex.start(Task("u" * 64, "w" * 64, b"\x00" * 150, target, early.resume_at, options))
            rest = _wait(ex, 120.0)
            assert rest.status is ExitKind.OK and rest.resume_at is None and "cut_short" not in rest.stats
            assert len({c.data for c in (*early.candidates, *rest.candidates)}) >= 150
        else:  # (the traced executor traces every child: kept short)
            full = _wait_task(ex, target, options, 40)
            assert full.status is ExitKind.OK and "cut_short" not in full.stats and full.resume_at is None
            assert len(full.candidates) >= 40
    finally:
        ex.close()


# Every branch a child: a query gets 5 s, not the default 200 ms, which a loaded CI run's light
# test (at nice 5 beside a heavy one) overran twice (39 children of 40: z3 unknown).
FULL = {"max_candidates": 1000, "solver_budget_s": 60.0, "solver_timeout_ms": 5000}


def _wait_task(ex, target: str, options: dict, size: int = 150):
    ex.start(Task("u" * 64, "v" * 64, b"\x00" * size, target, 0, options))
    return _wait(ex, 120.0)


WATCHDOG = r'''
import os, signal, time, z3
from symfence.worker.concolic import cut
cut.install()
ctx = z3.Context()
x, y = z3.BitVecs("x y", 64, ctx=ctx)
hard = [x * y == z3.BitVecVal(0xC3A5C85C97CB3127, 64, ctx=ctx), z3.UGT(x, 1), z3.UGT(y, 1),
        z3.ULT(x, 1 << 32), z3.ULT(y, 1 << 32)]

def timed(timeout_ms, armed_s, after=None):
    s = z3.Solver(ctx=ctx)
    s.set("timeout", timeout_ms)  # z3's own time-out, far away: only the watchdog can end it
    s.add(*hard)
    cut.arm(ctx, armed_s)
    if after is not None:
        after()
    t = time.monotonic()
    try:
        return s.check(), time.monotonic() - t
    finally:
        cut.disarm()

r, took = timed(60000, 0.1)  # armed for a 0.1 s query: interrupted at 0.7 s
print("overrun", r, round(took, 2), cut.overruns(), cut.requested())
r, took = timed(60000, 30.0, lambda: os.kill(os.getpid(), signal.SIGUSR1))  # a cut mid-call
print("cut", r, round(took, 2), cut.overruns(), cut.requested())
'''


def test_the_watchdog_interrupts_a_z3_call_that_overruns_or_is_cut(tmp_path: Path) -> None:
    """One z3 call that z3's own time-out would let run for a minute: interrupted by the child's
    watchdog thread once it overruns its armed time-out (2x + 0.5 s), and at once on SIGUSR1
    (which Python's own handlers could not see until the call returned). In a process of its
    own: the watchdog blocks SIGUSR1 and starts a thread."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", WATCHDOG], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    overrun, cutline = run.stdout.split("\n")[:2]
    kind, result, took, overruns, requested = overrun.split()
    assert result == "unknown" and float(took) < 30 and overruns == "1" and requested == "False", overrun
    kind, result, took, overruns, requested = cutline.split()
    assert result == "unknown" and float(took) < 30 and overruns == "1" and requested == "True", cutline


def test_a_child_that_does_not_end_its_task_in_time_is_ended_with_what_it_streamed(target: str) -> None:
    """A cut task whose child does not answer within CUT_GRACE_S (a z3 call deaf to its interrupt,
    here a 30 s sleep) is ended like one past its deadline, as an OK answer with what the child
    streamed; the executor goes on with a fresh child."""
    from symfence.worker.childproc import CUT_GRACE_S

    stuck = target.replace(":many_branches", ":stuck")
    with ConcolicExecutor() as ex:
        ex.start(Task("t" * 64, "w" * 64, b"\x00", stuck, 0, {"exec_timeout_s": 60.0}))
        deadline = time.monotonic() + 30
        while not ex.end_turn():
            assert ex.wait(0.05) is None and time.monotonic() < deadline
        cut_at = time.monotonic()
        early = _wait(ex, 20.0)
        assert early.status is ExitKind.OK and early.stats.get("cut_killed") == 1
        assert early.resume_at == 0  # how far it got is not known: all of it again, from its bound
        assert time.monotonic() - cut_at < CUT_GRACE_S + 5
        full = _wait_task(ex, target, FULL, size=20)
        assert full.status is ExitKind.OK and len(full.candidates) >= 20


def test_a_z3_call_refused_after_an_interrupt_ends_the_task_with_the_rest_handed_back(target, monkeypatch):
    """An interrupt that lands after its query ended makes z3 refuse the next call in that
    context ("canceled", in model evaluation): the task answers with what it has and the branch
    it was at, not as an engine error that loses the input's other branches."""
    import z3

    from symfence.worker.concolic import engine as engine_mod

    def refused(self, run):
        self.branch = 7
        raise z3.Z3Exception(b"canceled")

    monkeypatch.setattr(engine_mod._Search, "_expand", refused)
    outcome = engine_mod.ConcolicEngine().run_task(Task("t" * 64, "w" * 64, b"\x00" * 20, target, 3, {}))
    assert outcome.status is ExitKind.OK, outcome.error
    assert outcome.resume_at == 7 and outcome.stats["z3_canceled"] == 1

    def broken(self, run):
        raise z3.Z3Exception(b"invalid argument")  # any other z3 error stays an engine error

    monkeypatch.setattr(engine_mod._Search, "_expand", broken)
    outcome = engine_mod.ConcolicEngine().run_task(Task("t" * 64, "w" * 64, b"\x00" * 20, target, 3, {}))
    assert outcome.status is ExitKind.ERROR and outcome.resume_at is None


def test_a_branch_whose_query_the_cut_made_unknown_is_handed_back(target, monkeypatch):
    """The cut lands while a branch's query runs: that query comes back unknown, and the branch
    was not tried. The task hands back from that branch, not the next one (the README's msgparse
    campaign lost its out-of-memory branch this way in 2 of ~10 runs: the item was done)."""
    from symfence.worker.concolic import cut
    from symfence.worker.concolic import engine as engine_mod

    solve, asked = engine_mod._Search._solve, []

    def cut_during_the_third(self, prefix, index, *args, **kwargs):
        asked.append(index)
        if len(asked) == 3:
            cut._on_signal(cut.SIGNAL, None)  # as the watchdog thread does on the worker's SIGUSR1
        return solve(self, prefix, index, *args, **kwargs)

    monkeypatch.setattr(engine_mod._Search, "_solve", cut_during_the_third)
    try:
        outcome = engine_mod.ConcolicEngine().run_task(Task("t" * 64, "w" * 64, b"\x00" * 20, target, 0, {}))
    finally:
        cut.clear()
    assert outcome.status is ExitKind.OK and outcome.stats["cut_short"] == 1
    assert len(asked) == 3 and outcome.resume_at == asked[2]
