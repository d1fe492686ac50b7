"""The two stages' parts without MPI: the real tracer, the fuzz slice executor, the dictionary
the engine gives the fuzzer, the slice spec and the hybrid plan's choices and deltas."""

from __future__ import annotations

import importlib.util
import os
import time

import pytest

import tests
from symfence.coordinator.config import parse
from symfence.coordinator.credit import EngineFinds
from symfence.coordinator.hybrid import HybridPlan, Stage
from symfence.coordinator.scheduler import Scheduler, WorkItem
from symfence.protocol.fuzzslice import SliceSpec, pack_spec, unpack_spec
from symfence.protocol.ids import Rank
from symfence.worker.concolic.dictionary import comparison_constants
from symfence.worker.concolic.execution import execute
from symfence.worker.concolic.instrument import load_target
from symfence.worker.executors import make_executor
from symfence.worker.executors.base import ExitKind, Task
from symfence.worker.realtrace.tracer import ArcTracer, default_include, load_callable, resolve_include


def _run(executor, task, limit_s=120.0):
    executor.start(task)
    deadline = time.monotonic() + limit_s
    while (outcome := executor.wait(0.05)) is None:
        assert time.monotonic() < deadline, "task did not finish"
    return outcome


def _real(target: str, data: bytes) -> dict[int, int]:
    module, fn = load_callable(target)
    return ArcTracer(resolve_include([], module)).run(fn, data, 2.0).trace


# -- the real tracer ----------------------------------------------------------------------------


def test_tracer_sees_library_code_and_not_symfence():
    module, fn = load_callable("tests.hybrid_targets:plist")
    roots = default_include(module)
    assert any(r.endswith("plistlib.py") for r in roots)
    assert any(r == os.path.dirname(tests.__file__) + os.sep for r in roots)  # the target's own package
    # None of symfence's own packages, wherever the checkout lives (its path may well contain
    # "symfence" or "/worker/"): judged by the packages' locations, not by path substrings.
    own = [os.path.dirname(importlib.util.find_spec(name).origin) + os.sep
           for name in ("symfence", "symfence.protocol", "symfence.coordinator", "symfence.worker")]
    own += [os.path.realpath(d) + os.sep for d in own]
    assert not any(os.path.realpath(r).startswith(tuple(own)) or r.startswith(tuple(own)) for r in roots), roots
    tracer = ArcTracer(roots)
    xml = tracer.run(fn, b'<?xml version="1.0"?><plist version="1.0"><dict><key>a</key><integer>1</integer></dict></plist>', 2.0)
    binary = tracer.run(fn, b"bplist00\x08\x00\x00\x00\x00\x00\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00\x01"
                        b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x09", 2.0)
    assert xml.status == binary.status == "ok"
    assert len(xml.trace) > 30 and len(binary.trace) > 10  # plistlib's own arcs
    assert set(xml.trace) != set(binary.trace)
    assert tracer.run(fn, b"", 2.0).trace == tracer.run(fn, b"", 2.0).trace  # deterministic
    boom = ArcTracer(roots).run(lambda d: 1 / 0, b"", 2.0)
    assert boom.status == "crash" and "ZeroDivisionError" in boom.detail
    assert ArcTracer(roots).run(lambda d: [0 for _ in iter(int, 1)], b"", 0.2).status == "hang"


def test_concolic_candidates_carry_the_real_trace():
    """The engine's candidates keep their branch-site edges and gain the real arcs."""
    ex = make_executor("concolic")
    try:
        outcome = _run(ex, Task("t" * 64, "w" * 64, b"\x00" * 8, "examples.magic_header:target", 0,
                                {"exec_timeout_s": 1.0}))
    finally:
        ex.close()
    assert outcome.status is ExitKind.OK and outcome.candidates
    assert outcome.stats["trace_execs"] == len(outcome.candidates) + 1
    for c in outcome.candidates:
        real = _real("examples.magic_header:target", c.data)
        assert real and set(real) <= set(c.trace), c.data
    assert set(_real("examples.magic_header:target", b"\x00" * 8)) <= set(outcome.trace)


# -- the fuzz slice -----------------------------------------------------------------------------


def test_fuzz_slice_keeps_inputs_and_goes_on_after_crashes():
    """A Python crash is caught inside the fuzz process; a native abort ends the process and it
    restarts (without the corpus entry that killed it); kept inputs come back with their real
    traces. The start corpus holds one input of each crash; a turn is cut short (after 1 s) by
    each new find, and what it did not reach, the next turns report."""
    target = "tests.hybrid_targets:native_and_python"
    ex = make_executor("fuzz")

    def hangs_of(outcomes: list) -> set:
        return {c.data[:2] for o in outcomes for c in o.candidates if c.kind is ExitKind.HANG}

    def shallow_bug(outcomes: list) -> bool:
        return any(c.kind is ExitKind.CRASH and "ShallowBug" in c.detail for o in outcomes for c in o.candidates)

    try:
        entries = (b"\x00\x00", b"\x01\x02", b"\xab\x01", b"\x02\x02", b"\x03\x03")
        outcomes = [_run(ex, Task("t" * 64, "w" * 64, pack_spec(SliceSpec(entries, (b"\xab\xab",))),
                                  target, 1, {"slice_s": 6.0, "exec_timeout_s": 0.2}))]
        while len(outcomes) < 8 and (hangs_of(outcomes) != {b"\x02\x02", b"\x03\x03"} or not shallow_bug(outcomes)):
            outcomes.append(_run(ex, Task("t" * 64, "v" * 64, pack_spec(SliceSpec()), target, 2,
                                          {"slice_s": 4.0, "exec_timeout_s": 0.2})))
        # one more: a process the last find ended starts again here
        outcomes.append(_run(ex, Task("t" * 64, "u" * 64, pack_spec(SliceSpec()), target, 2,
                                      {"slice_s": 1.5, "exec_timeout_s": 0.2})))
    finally:
        ex.close()
    assert all(o.status is ExitKind.OK for o in outcomes), [o.error for o in outcomes]
    assert outcomes[0].execs > 0
    assert outcomes[0].stats["fuzz_restarts"] + sum(o.stats["fuzz_runs"] for o in outcomes[1:]) >= 1  # it restarted
    candidates = [c for o in outcomes for c in o.candidates]
    crashes = [c for c in candidates if c.kind is ExitKind.CRASH]
    assert any("ShallowBug" in c.detail for c in crashes)
    native = [c for c in crashes if "NativeCrash" in c.detail]
    assert native and all(c.data[0] == 0xAB for c in native)
    assert all('in native_and_python' in c.detail for c in native)  # the Python stack
    hangs = {c.data[:2] for c in candidates if c.kind is ExitKind.HANG}
    assert hangs == {b"\x02\x02", b"\x03\x03"}, hangs  # CPU hang caught inside; sleep by the watchdog
    for c in candidates:
        if c.kind is ExitKind.OK:
            assert c.trace == _real(target, c.data)


def test_fuzz_slice_errors_say_why():
    ex = make_executor("fuzz")
    try:
        bad = _run(ex, Task("t" * 64, "w" * 64, b"not a spec", "tests.hybrid_targets:plist", 1, {}))
        missing = _run(ex, Task("t" * 64, "w" * 64, pack_spec(SliceSpec()), "tests.no_such_module:f", 2,
                                {"slice_s": 1.0}))
    finally:
        ex.close()
    assert bad.status is ExitKind.ERROR and "bad fuzz slice" in bad.error
    assert missing.status is ExitKind.ERROR and "no_such_module" in missing.error


def test_slice_spec_is_strict():
    spec = SliceSpec((b"a", b"bc"), (b"SYMF",))
    assert unpack_spec(pack_spec(spec)) == spec
    for bad in (b"", b"\x93\x01\x02\x03", pack_spec(SliceSpec()) + b"x"):
        with pytest.raises(ValueError):
            unpack_spec(bad)
    with pytest.raises(ValueError):
        unpack_spec(pack_spec(SliceSpec((), (b"x" * 200,))))


# -- dictionary ---------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, data, expected", [
    ("examples.magic_header:target", b"SYMF\x03\x00\x00!", {b"SYMF", b"\xbe\xef", b"\xef\xbe"}),
    ("examples.keyvalue:target", b"a=b\n[x]\n", {b"name=", b"port=", b"mode="}),
])
def test_engine_constants_become_dictionary_tokens(spec, data, expected):
    run = execute(load_target(spec), data, symbolic=True, timeout_s=5, max_branches=500)
    tokens = comparison_constants(run.recorder.conds)
    assert expected <= set(tokens)
    assert all(len(t) >= 2 for t in tokens) and len(tokens) == len(set(tokens))


# -- hybrid plan ---------------------------------------------------------------------------------


def _plan(executor: str, **fuzz) -> HybridPlan:
    return HybridPlan.from_config(parse({"campaign": {"executor": executor, "targets": ["a:t"]},
                                         "fuzz": {"slice_s": 10.0, **fuzz}}))


def _scheduler(n: int) -> Scheduler:
    s = Scheduler()
    for i in range(n):
        s.add(WorkItem(f"{i:064x}", bytes([i]), "0" * 64, "a:t", origin="concolic"))
    return s


def test_plan_modes():
    r = Rank(1)
    concolic = _plan("concolic")
    assert concolic.pick(r, _scheduler(1)).stage == "" and concolic.pick(r, Scheduler()) is None
    fuzz = _plan("fuzz")
    assert [fuzz.pick(r, _scheduler(3)).stage for _ in range(2)] == ["fuzz", "fuzz"]  # depth 2
    assert fuzz.pick(r, _scheduler(3)) is None
    hybrid = _plan("hybrid", share=0.5)
    s = _scheduler(5)
    first = hybrid.pick(r, s)
    assert first.stage == "fuzz"  # nothing ran yet: the fuzz stage is behind its share
    assert hybrid.pick(r, s).stage == ""  # one slice per rank while the engine has work
    assert hybrid.pick(Rank(2), Scheduler()).stage == "fuzz"  # an idle engine queue: fuzz
    assert _plan("hybrid", share=0.0).pick(r, _scheduler(1)).stage == ""


def _ran(plan: HybridPlan, stage: Stage, busy_s: float, edges: int, results: int = 1) -> None:
    f = plan.figures[stage]
    f.busy_s, f.edges_first, f.results = f.busy_s + busy_s, f.edges_first + edges, f.results + results


def test_plan_auto_share_follows_productivity():
    plan = _plan("hybrid")
    assert plan.share() == 0.9  # nothing ran yet: the engine gets a tenth, to be judged
    _ran(plan, Stage.FUZZ, 20.0, 0, 0)
    _ran(plan, Stage.CONCOLIC, 20.0, 0, 0)
    assert plan.share() == 0.9  # too few results of each stage yet
    _ran(plan, Stage.FUZZ, 0.0, 900, 3)
    _ran(plan, Stage.CONCOLIC, 0.0, 10, 3)
    assert plan.share() == 0.97  # an engine that finds (almost) nothing: 3% of the time
    _ran(plan, Stage.FUZZ, 20.0, 10)
    _ran(plan, Stage.CONCOLIC, 20.0, 5000)
    assert plan.share() == 0.75  # the engine finds much more: at most a quarter of the time


def test_plan_auto_share_follows_recent_finds():
    """An engine whose finds dried up loses its share although its early finds outnumber the
    fuzz stage's: the rates compared are recent ones."""
    plan = _plan("hybrid")
    _ran(plan, Stage.FUZZ, 10.0, 100, 3)
    _ran(plan, Stage.CONCOLIC, 10.0, 5000, 3)  # the seeds' first runs: a burst
    assert plan.share() == 0.75
    for _ in range(60):  # then: the fuzz stage keeps finding a little, the engine nothing
        _ran(plan, Stage.FUZZ, 9.0, 20)
        _ran(plan, Stage.CONCOLIC, 1.0, 0)
        plan.share()
    cumulative = (101 / plan.figures[Stage.FUZZ].busy_s) / (5001 / plan.figures[Stage.CONCOLIC].busy_s)
    assert cumulative < 0.1  # by the whole run's rates the engine would still get half
    assert plan.share() > 0.9


def test_plan_auto_share_when_neither_stage_finds_anything():
    """A saturated harness: neither stage has found an edge for a while. The fuzz stage is the
    cheap default, so the engine falls to its floor; with a prior of one edge each, the stage that
    had less time looked the better one and the split settled at half each (wave, run 6)."""
    plan = _plan("hybrid")
    _ran(plan, Stage.FUZZ, 10.0, 100, 3)
    _ran(plan, Stage.CONCOLIC, 10.0, 100, 3)
    assert plan.share() == 0.75  # found alike: the engine at most a quarter
    for _ in range(60):  # then nothing, at whatever split the share asks for
        s = plan.share()
        _ran(plan, Stage.FUZZ, 10.0 * s, 0)
        _ran(plan, Stage.CONCOLIC, 10.0 * (1 - s), 0)
    assert plan.share() == 0.97
    _ran(plan, Stage.CONCOLIC, 0.3, 2)  # the engine finds again: it gets its time back at once
    assert plan.share() == 0.75


def test_a_fuzz_turn_takes_back_the_edges_the_engine_was_credited_with_during_it():
    """A fuzz turn reports at its end; an engine task committed meanwhile with the same edges got
    them first. The turn's commit takes back those the engine was credited with after the turn
    began (the fuzz stage reached them on its own), not those from before it began."""
    plan = _plan("hybrid")
    seen = bytearray(1 << 16)
    fuzz, engine = plan.figures[Stage.FUZZ], plan.figures[Stage.CONCOLIC]

    def merge(trace: dict[int, int]) -> None:
        for edge in trace:
            seen[edge] = 1

    before = {1: 1, 2: 1}
    assert plan.credit_first(Stage.CONCOLIC, before, seen, now=100.0, began=99.0) == 2
    merge(before)
    during = {3: 1, 4: 1, 5: 1}
    assert plan.credit_first(Stage.CONCOLIC, during, seen, now=105.0, began=104.0) == 3
    merge(during)
    assert (engine.edges_first, fuzz.edges_first) == (5, 0)
    turn = {1: 1, 3: 1, 4: 1, 9: 1}  # a turn that began at 102: edges 3 and 4 came after, 9 is new
    assert plan.credit_first(Stage.FUZZ, turn, seen, now=112.0, began=102.0) == 1
    merge(turn)
    assert (engine.edges_first, fuzz.edges_first) == (3, 3)
    assert plan.credit_first(Stage.FUZZ, turn, seen, now=113.0, began=102.0) == 0  # once only
    assert (engine.edges_first, fuzz.edges_first) == (3, 3)
    assert _plan("fuzz")._finds is None and _plan("concolic")._finds is None  # one stage: no record


def test_engine_finds_forget_after_their_horizon():
    finds = EngineFinds(horizon_s=60.0)
    finds.found([1, 2], now=0.0)
    finds.found([3], now=30.0)
    assert len(finds) == 3
    finds.found([4], now=70.0)  # 1 and 2 are older than 60 s now
    assert len(finds) == 2
    assert finds.reclaim([1, 2, 3, 4], since=0.0) == 2
    assert len(finds) == 0 and finds.reclaim([3], since=0.0) == 0


def test_the_share_follows_edges_taken_back():
    """The engine's finds that a fuzz turn takes back leave its recent rate: an engine that only
    found what the fuzz stage found in the same turns falls to its floor."""
    plan = _plan("hybrid")
    seen = bytearray(1 << 16)
    t = 0.0
    for turn in range(12):
        edges = {1000 * turn + i: 1 for i in range(50)}  # the engine reports them first ...
        plan.credit_first(Stage.CONCOLIC, edges, seen, now=t + 2.0, began=t + 1.0)
        for edge in edges:
            seen[edge] = 1
        plan.credit_first(Stage.FUZZ, {**edges, 1000 * turn + 999: 1}, seen, now=t + 10.0, began=t)  # ... in its turn
        seen[1000 * turn + 999] = 1
        _ran(plan, Stage.CONCOLIC, 1.0, 0)
        _ran(plan, Stage.FUZZ, 9.0, 0)
        plan.share()
        t += 10.0
    assert plan.figures[Stage.CONCOLIC].edges_first == 0
    assert plan.share() == 0.97


def test_engine_tasks_wait_while_the_fuzz_stage_is_behind():
    """A rank that holds a turn gets no engine task behind it while the fuzz stage is behind its
    share (the worker would run that task next, whatever the share); once ahead, it does."""
    r = Rank(1)
    plan = _plan("hybrid", share=0.9)
    s = _scheduler(5)
    plan.figures[Stage.FUZZ].busy_s, plan.figures[Stage.CONCOLIC].busy_s = 50.0, 20.0
    assert plan.pick(r, s).stage == "fuzz"
    assert plan.pick(r, s) is None and len(s) == 5  # behind (60 of 80 s): the engine waits
    fresh = _plan("hybrid", share="auto")  # nothing ran yet: 0.9 until judged
    assert fresh.pick(r, s).stage == "fuzz" and fresh.pick(r, s) is None  # no engine task behind the turn
    plan.figures[Stage.FUZZ].busy_s = 300.0  # ahead of 90%, even after an engine task
    assert plan.pick(r, s).stage == ""


def test_slices_carry_deltas_acknowledged_by_commit():
    plan = _plan("fuzz")
    r = Rank(1)
    plan.add_entry("a:t", b"seed")
    plan.add_tokens("a:t", [b"SYMF", b"", b"SYMF"])  # empty ones are dropped, repeats too
    first = plan.pick(r, Scheduler())
    assert unpack_spec(first.data) == SliceSpec((b"seed",), (b"SYMF",))
    plan.slice_ended(first, committed=False)  # revoked: the next slice resends
    again = plan.pick(r, Scheduler())
    assert unpack_spec(again.data).entries == (b"seed",)
    plan.slice_ended(again, committed=True)
    plan.add_entry("a:t", b"new")
    third = plan.pick(r, Scheduler())
    assert unpack_spec(third.data) == SliceSpec((b"new",), ())
    assert unpack_spec(plan.pick(Rank(2), Scheduler()).data).entries == (b"seed", b"new")  # other rank
    assert len({first.work_id, again.work_id, third.work_id}) == 3


def test_a_long_backlog_goes_over_several_slices():
    plan = _plan("fuzz")
    big = [bytes([i]) * (1 << 20) for i in range(10)]  # 10 MiB of corpus
    for data in big:
        plan.add_entry("a:t", data)
    got: list[bytes] = []
    for _ in range(5):
        item = plan.pick(Rank(1), Scheduler())
        entries = unpack_spec(item.data).entries
        assert sum(map(len, entries)) <= 4 << 20
        got += entries
        plan.slice_ended(item, committed=True)
    assert got == big


def test_slices_end_with_the_budget():
    plan = _plan("hybrid")
    assert plan.slice_options(None)["slice_s"] == 10.0
    assert plan.slice_options(4.26)["slice_s"] == 4.3
    assert plan.slice_options(0.2)["slice_s"] == 1.0


def test_an_aborted_slice_stops_the_process_and_the_next_one_resumes_it():
    import os

    ex = make_executor("fuzz")
    try:
        ex.start(Task("t" * 64, "w" * 64, pack_spec(SliceSpec((b"\x00",), ())), "tests.hybrid_targets:plist", 1,
                      {"slice_s": 30.0}))
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert ex.wait(0.05) is None
        pid = ex.inner.child_pid
        ex.abort()  # what a CANCEL (deadline, stop) does: the process stays, stopped
        deadline = time.monotonic() + 2.0
        while _state(pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(pid) == "T"
        assert ex.wait(0.05) is None
        outcome = _run(ex, Task("t" * 64, "v" * 64, pack_spec(SliceSpec()), "tests.hybrid_targets:plist", 2,
                                {"slice_s": 1.0}))
        assert outcome.stats["fuzz_runs"] == 0 and ex.inner.child_pid == pid  # the same process went on
    finally:
        ex.close()
    with pytest.raises(ProcessLookupError):  # close() ends it
        os.killpg(pid, 0)
    assert outcome.status is ExitKind.OK and outcome.execs > 0


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_engine_task_in_flight_counts_in_the_share():
    """A long engine task is the engine's time while it runs: with the engine at its share, the
    other rank gets a turn, not one more engine task (a task's time counted only at its commit
    let the engine run far past its share; measured: 25-30 s tasks among 1 s ones at load)."""
    clock = _Clock()
    plan = _plan("hybrid", share=0.5)
    plan.clock = clock
    s = _scheduler(5)
    plan.figures[Stage.FUZZ].busy_s, plan.figures[Stage.CONCOLIC].busy_s = 40.0, 20.0
    plan.figures[Stage.CONCOLIC].results = 20
    first = plan.pick(Rank(1), s)
    assert first.stage == ""  # the fuzz stage is ahead (40 of 60 s): an engine task
    clock.now += 25.0  # ... that runs 25 s without a result
    assert plan.pick(Rank(2), s).stage == "fuzz"  # the engine has had 45 s of 85: fuzz is behind
    plan.engine_ended(first.work_id)  # cancelled: its time was never committed
    assert plan._engine_running_s() == 0.0


def test_no_engine_task_near_the_end_while_one_runs_longer_than_what_is_left():
    clock = _Clock()
    plan = _plan("hybrid", share=0.5)
    plan.clock = clock
    s = _scheduler(5)
    plan.figures[Stage.FUZZ].busy_s, plan.figures[Stage.CONCOLIC].busy_s = 400.0, 20.0
    plan.figures[Stage.CONCOLIC].results = 20  # a mean of 1 s
    assert plan.pick(Rank(1), s, budget_left_s=30.0).stage == ""
    clock.now += 20.0  # still running after 20 s: such tasks are to be expected
    assert plan.pick(Rank(2), s, budget_left_s=10.0).stage == "fuzz"
    assert plan.pick(Rank(2), s, budget_left_s=10.0).stage == ""  # one turn per rank; then as before


def test_engine_tasks_whose_end_is_never_told_do_not_pile_up():
    plan = _plan("hybrid", share=0.0)
    s = _scheduler(50)
    for _ in range(40):
        assert plan.pick(Rank(1), s).stage == ""
    assert len(plan._engine) == 2 * plan.depth
