"""How a worker waits (issue 13): blocking on its running task, backing off when idle, and not
spinning when ranks outnumber cores. Asserts the waiting state the loop asked for, never time."""

import os

from symfence.protocol.backoff import SPINS, Backoff, local_ranks, spins_for_host
from symfence.protocol.codec import encode
from symfence.protocol.ids import TokenMinter, sha256_hex
from symfence.protocol.messages import Control, ControlKind, Tag, Work
from symfence.worker import loop as worker_loop
from symfence.worker.executors.base import Outcome
from symfence.protocol.messages import Status


def test_spinning_only_when_every_rank_has_a_core():
    assert spins_for_host(ranks=2, cores=2) == spins_for_host(ranks=4, cores=2) == SPINS
    assert spins_for_host(ranks=65, cores=2) == 0
    assert spins_for_host(ranks=None, cores=2) == SPINS  # not launched by a known launcher
    assert local_ranks({"MPI_LOCALNRANKS": "64"}) == 64  # MPICH (Hydra)
    assert local_ranks({"OMPI_COMM_WORLD_LOCAL_SIZE": "8"}) == 8  # Open MPI
    assert local_ranks({"MPI_LOCALNRANKS": "x"}) is None and local_ranks({}) is None


def test_an_idle_backoff_without_spins_sleeps_at_once_up_to_its_cap():
    b = Backoff(cap_s=0.01, spins=0)
    delays = [b.next_delay() for _ in range(12)]
    assert delays[0] > 0 and b.sleeping
    assert delays[-1] == b.delay == 0.01


class FakeEndpoint:
    """Scripted inbound frames; records sends and how often the loop polled."""

    def __init__(self, inbound):
        self.rank = 1
        self.inbound = list(inbound)
        self.sent = []
        self.polls = 0
        self.later = None  # (poll number, frame): delivered from that poll on

    def poll(self, source=None, limit=64):
        self.polls += 1
        if self.later is not None and self.polls >= self.later[0]:
            self.inbound.append(self.later[1])
            self.later = None
        out, self.inbound = self.inbound[:limit], self.inbound[limit:]
        return out

    def send(self, dest, tag, frame):
        self.sent.append((dest, tag, frame))

    def flush(self, timeout_s=5.0):
        return True


class SlowExecutor:
    """A task that is done after `waits` calls to wait(); records each wait's timeout."""

    def __init__(self, waits, on_done):
        self.waits, self.on_done, self.timeouts = waits, on_done, []

    def start(self, task):
        self.task = task

    def wait(self, timeout_s):
        self.timeouts.append(timeout_s)
        if len(self.timeouts) < self.waits:
            return None
        self.on_done()
        return Outcome(status=Status.OK, wall_s=0.0, cpu_s=0.0)

    def abort(self):
        pass

    def close(self):
        pass


def test_a_worker_with_a_task_running_blocks_on_it_and_polls_mpi_once_per_wait(monkeypatch, tmp_path):
    setup = Control(ControlKind.SETUP, info={
        "rank": 1, "heartbeat_s": 1000.0, "poll_cap_ms": 10.0, "log_path": str(tmp_path / "w.jsonl"),
        "faults": {}, "max_message_bytes": 1 << 20, "world_size": 2})
    data = b"x"
    token = TokenMinter(os.urandom(32)).mint(1)
    work = Work(token, "a" * 64, data, sha256_hex(data), "slow", "t")
    world = FakeEndpoint([(0, Tag.CONTROL, encode(setup)), (0, Tag.WORK, encode(work))])
    def stop():  # after the result is answered
        world.later = (world.polls + 2, (0, Tag.CONTROL, encode(Control(ControlKind.STOP))))

    executor = SlowExecutor(waits=5, on_done=stop)
    monkeypatch.setattr(worker_loop, "make_executor", lambda name: executor)
    monkeypatch.setenv("MPI_LOCALNRANKS", "4096")  # more ranks than any test machine has cores
    w = worker_loop.Worker(world, FakeEndpoint([]), lambda path, rank: None)
    assert w.run() == 0
    # A crowded host: no spinning, idle sleeps up to the crowded cap.
    assert w.backoff.spins == 0 and w.backoff.cap_s == worker_loop.CROWDED_IDLE_CAP_S
    # Every wait on the running task blocks for the longer running wait, not the poll cap.
    assert executor.timeouts[1:] and all(t == worker_loop.CROWDED_RUNNING_WAIT_S for t in executor.timeouts[1:])
    # One look at MPI per wait (plus set-up, the task's start and the answer): no tight polling.
    assert world.polls <= len(executor.timeouts) + 6
    kinds = [tag for _, tag, _ in world.sent]
    assert kinds.count(Tag.RESULT) == 1


def test_an_uncrowded_worker_waits_on_its_task_for_the_running_wait(monkeypatch, tmp_path):
    monkeypatch.setenv("MPI_LOCALNRANKS", "1")
    setup = Control(ControlKind.SETUP, info={
        "rank": 1, "heartbeat_s": 1000.0, "poll_cap_ms": 10.0, "log_path": str(tmp_path / "w.jsonl"),
        "faults": {}, "max_message_bytes": 1 << 20, "world_size": 2})
    data = b"y"
    work = Work(TokenMinter(os.urandom(32)).mint(1), "b" * 64, data, sha256_hex(data), "slow", "t")
    world = FakeEndpoint([(0, Tag.CONTROL, encode(setup)), (0, Tag.WORK, encode(work))])

    def stop():
        world.later = (world.polls + 2, (0, Tag.CONTROL, encode(Control(ControlKind.STOP))))

    executor = SlowExecutor(waits=3, on_done=stop)
    monkeypatch.setattr(worker_loop, "make_executor", lambda name: executor)
    w = worker_loop.Worker(world, FakeEndpoint([]), lambda path, rank: None)
    assert w.run() == 0
    assert w.backoff.spins == SPINS and w.backoff.cap_s == 0.01
    assert all(t == worker_loop.RUNNING_WAIT_S for t in executor.timeouts[1:])
