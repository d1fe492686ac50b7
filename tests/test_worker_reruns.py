"""A re-run the campaign waits on (a claim's confirmation, ``RERUN_BOUND``) jumps the worker's
queue and ends a running fuzz turn early (``engine_api.Turns``), with real frames through the
real worker loop (scripted endpoint, executors standing in for the fuzz turn and the re-run)."""

from __future__ import annotations

import os
import time

from symfence.protocol.codec import decode_result_frame, encode
from symfence.protocol.ids import TokenMinter, sha256_hex
from symfence.protocol.messages import RERUN_BOUND, Control, ControlKind, Status, Tag, Work
from symfence.worker import loop as worker_loop
from symfence.worker.engine_api import Turns
from symfence.worker.executors.base import Outcome
from tests.test_worker_waiting import FakeEndpoint

WAITS_CAP = 2000  # a turn nobody ends answers after this many waits (the test then fails, not hangs)


class TurnExecutor:
    """A fuzz turn: open-ended until `end_turn`; records whether it was cut."""

    def __init__(self) -> None:
        self.cut = False
        self.waits = 0

    def start(self, task):
        self.cut, self.waits, self.task = False, 0, task

    def end_turn(self) -> bool:
        self.cut = True
        return True

    def wait(self, timeout_s):
        self.waits += 1
        if self.cut or self.waits >= WAITS_CAP:
            return Outcome(status=Status.OK, wall_s=0.0, cpu_s=0.0, stats={"cut": int(self.cut)})
        return None

    def abort(self):
        pass

    def close(self):
        pass


class QuickExecutor(TurnExecutor):
    """Any other task: done at its first wait."""

    def wait(self, timeout_s):
        return Outcome(status=Status.OK, wall_s=0.0, cpu_s=0.0)

    end_turn = None  # type: ignore[assignment]  # not a Turns executor


def _work(minter: TokenMinter, n: int, executor: str, bound: int = 0) -> Work:
    data = str(n).encode()
    return Work(minter.mint(1), f"{n:064x}", data, sha256_hex(data), executor, "t", bound)


def _setup(tmp_path) -> Control:
    return Control(ControlKind.SETUP, info={
        "rank": 1, "heartbeat_s": 1000.0, "poll_cap_ms": 10.0, "log_path": str(tmp_path / "w.jsonl"),
        "faults": {}, "max_message_bytes": 1 << 20, "world_size": 2})


def _serve(world: FakeEndpoint, results: int) -> tuple[worker_loop.Worker, list]:
    """Run a worker over `world` until it has answered `results` results (then STOP)."""
    answered: list = []
    real_send = world.send

    def send(dest, tag, frame):
        real_send(dest, tag, frame)
        if tag == Tag.RESULT:
            answered.extend(decode_result_frame(frame))
            if len(answered) == results:
                world.inbound.append((0, Tag.CONTROL, encode(Control(ControlKind.STOP))))

    world.send = send  # type: ignore[method-assign]
    w = worker_loop.Worker(world, FakeEndpoint([]), lambda path, rank: None)
    assert w.run() == 0
    return w, answered


def test_a_rerun_runs_next_and_ends_the_running_fuzz_turn_early(monkeypatch, tmp_path):
    monkeypatch.setenv("MPI_LOCALNRANKS", "1")
    setup = _setup(tmp_path)
    minter = TokenMinter(os.urandom(32))
    turn, queued = _work(minter, 1, "turn"), _work(minter, 2, "quick")
    rerun = _work(minter, 3, "quick", RERUN_BOUND)
    world = FakeEndpoint([(0, Tag.CONTROL, encode(setup)), (0, Tag.WORK, encode(turn)),
                          (0, Tag.WORK, encode(queued))])
    world.later = (8, (0, Tag.WORK, encode(rerun)))  # arrives while the turn runs, behind `queued`
    executors = {"turn": TurnExecutor(), "quick": QuickExecutor()}
    assert isinstance(executors["turn"], Turns) and not isinstance(executors["quick"], Turns)
    monkeypatch.setattr(worker_loop, "make_executor", lambda name: executors[name])

    w, answered = _serve(world, results=3)
    assert [r.token for r in answered] == [turn.token, rerun.token, queued.token]  # the re-run went first
    assert answered[0].stats == {"cut": 1} and executors["turn"].waits < WAITS_CAP  # the turn was ended early
    assert w.counters["turns_ended_early"] == 1


def test_yield_ends_the_running_turn_and_every_turn_started_after_it(monkeypatch, tmp_path):
    """YIELD (the campaign's drain): the running fuzz turn answers early, and so does the next
    one it starts from its queue; each answer is a normal result (nothing cancelled)."""
    monkeypatch.setenv("MPI_LOCALNRANKS", "1")
    setup = _setup(tmp_path)
    minter = TokenMinter(os.urandom(32))
    first, second = _work(minter, 1, "turn"), _work(minter, 2, "turn")
    world = FakeEndpoint([(0, Tag.CONTROL, encode(setup)), (0, Tag.WORK, encode(first)),
                          (0, Tag.WORK, encode(second))])
    world.later = (8, (0, Tag.CONTROL, encode(Control(ControlKind.YIELD))))
    executor = TurnExecutor()
    monkeypatch.setattr(worker_loop, "make_executor", lambda name: executor)
    w, answered = _serve(world, results=2)
    assert [r.token for r in answered] == [first.token, second.token]
    assert [r.stats for r in answered] == [{"cut": 1}, {"cut": 1}] and w.counters["turns_ended_early"] == 2


class SteadyTask(TurnExecutor):
    """An engine task that runs until ended (each wait takes a millisecond, as a real one's)."""

    def wait(self, timeout_s):
        time.sleep(0.001)
        self.waits += 1
        if self.cut or self.waits >= 300:  # 0.3 s at least: six turns of the test's turn_s
            return Outcome(status=Status.OK, wall_s=0.0, cpu_s=0.0, stats={"cut": int(self.cut)})
        return None


def test_a_task_that_had_its_turn_ends_for_any_task_waiting_behind_it(monkeypatch, tmp_path):
    """Both stages run (SETUP's turn_s > 0): an engine task that has run turn_s while a task waits
    behind it ends early (it hands back the rest), a fuzz turn or another engine task alike: its
    answer frees the slot in which the coordinator's share decides again. Alone it goes on."""
    monkeypatch.setenv("MPI_LOCALNRANKS", "1")
    setup = _setup(tmp_path)
    setup = Control(ControlKind.SETUP, info={**setup.info, "turn_s": 0.05})
    minter = TokenMinter(os.urandom(32))
    for behind, cut in (("turn", 1), ("engine", 1), (None, 0)):
        engine = _work(minter, 1, "engine")
        inbound = [(0, Tag.CONTROL, encode(setup)), (0, Tag.WORK, encode(engine))]
        if behind is not None:
            inbound.append((0, Tag.WORK, encode(_work(minter, 2, behind))))
        world = FakeEndpoint(inbound)
        executors = {"engine": SteadyTask(), "turn": QuickExecutor()}
        monkeypatch.setattr(worker_loop, "make_executor", executors.__getitem__)
        w, answered = _serve(world, results=1 if behind is None else 2)
        first = answered[0]
        assert first.token == engine.token and first.stats == {"cut": cut}, behind
        assert w.counters["turns_ended_early"] == cut, behind  # the last task, alone, goes on


def test_a_fuzz_turn_yields_to_a_waiting_engine_task_after_yield_s_not_turn_s(monkeypatch, tmp_path):
    """SETUP's yield_s (per executor, the fuzz stage's): a fuzz turn with an engine task queued
    behind it ends after yield_s, long before turn_s; behind another fuzz turn it goes on to
    turn_s. Waiting out turn_s gave short engine tasks one round per fuzz turn."""
    monkeypatch.setenv("MPI_LOCALNRANKS", "1")
    setup = _setup(tmp_path)
    setup = Control(ControlKind.SETUP, info={**setup.info, "turn_s": 1000.0, "yield_s": {"turn": 0.05}})
    minter = TokenMinter(os.urandom(32))
    for behind, cut in (("engine", 1), ("turn", 0)):
        turn = _work(minter, 1, "turn")
        world = FakeEndpoint([(0, Tag.CONTROL, encode(setup)), (0, Tag.WORK, encode(turn)),
                              (0, Tag.WORK, encode(_work(minter, 2, behind)))])
        executors = {"turn": SteadyTask(), "engine": QuickExecutor()}  # "turn" behind: the same process
        monkeypatch.setattr(worker_loop, "make_executor", executors.__getitem__)
        w, answered = _serve(world, results=2)
        assert answered[0].token == turn.token and answered[0].stats == {"cut": cut}, behind
        assert w.counters["turns_ended_early"] == cut, behind
