"""The engine seam's child plumbing on its own: the message codec, and ChildExecutor over a real child
process running a small test engine (a dead child is replaced, a deadline kills the whole process
group, a malformed child message is a loud error)."""

from __future__ import annotations

import itertools
import os
import signal
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import structlog

from symfence.worker import childwire as wire
from symfence.worker.childproc import DISCARD, ChildExecutor, ChildProcess, Running
from symfence.worker.engine_api import Candidate, ExitKind, Outcome, Phase, Task

_counter = itertools.count()

# A childserve handler whose behaviour the input picks.
ENGINE = '''
import ctypes, os, subprocess, time
from symfence.worker.engine_api import Candidate, ExitKind, Outcome, Phase

class Handler:
    def run(self, request, events):
        data = request.task.data
        events.entered(Phase.INPUT, data)
        if data == b"die":  # below Python, as native code dies (os._exit is a target's crash: target_exit.py)
            ctypes.CDLL(None)._exit(3)
        if data == b"hang":
            helper = subprocess.Popen(["sleep", "300"])  # in this process group
            with open(request.task.options["pid_file"] + ".tmp", "w") as fh:
                fh.write(str(helper.pid))
            os.replace(request.task.options["pid_file"] + ".tmp", request.task.options["pid_file"])
            time.sleep(300)
        if data == b"garbage":
            events._conn.send_bytes(b"\\xc1 not msgpack")
            time.sleep(300)
        if data == b"stop":  # a parent's message, from the child
            events._conn.send_bytes(b"\\x91\\xa4stop")
            time.sleep(300)
        if data == b"fields":  # a known kind with a field of the wrong type
            events._conn.send_bytes(b"\\x92\\xa8subgroup\\xa3abc")
            time.sleep(300)
        events.found(Candidate(data + b"!", {1: 1}, ExitKind.OK, 1))
        return Outcome(ExitKind.OK, trace={7: 1}, execs=2)

    def close(self):
        pass

def handler(scratch_dir):
    return Handler()
'''


class _Adapter:
    """A test engine's adapter: a short execution deadline, outcomes that say what happened."""

    name = "test"
    stderr = DISCARD
    scratch = False
    eager = True
    start_timeout_s = 60.0

    def __init__(self, engine: str) -> None:
        self.engine = engine

    def options(self, task: Task) -> dict[str, object]:
        if "bad" in task.options:
            raise ValueError("option bad: no")
        return dict(task.options)

    def deadline(self, run: Running[dict[str, object]]) -> float:
        if run.phase is Phase.INPUT:
            return run.phase_since + 0.5
        return run.started + self.start_timeout_s

    def killed(self, run: Running[dict[str, object]]) -> Outcome:
        return Outcome(ExitKind.HANG, error=f"killed in {run.phase.value}")

    def died(self, run: Running[dict[str, object]], how: str, child: ChildProcess) -> Outcome:
        return Outcome(ExitKind.CRASH, error=f"{how} in {run.phase.value}")


@pytest.fixture
def executor(tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[ChildExecutor[dict[str, object]]]:
    name = f"sf_child_engine_{os.getpid()}_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(ENGINE))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the child imports its handler at start
    with ChildExecutor(_Adapter(name)) as ex:
        yield ex


def finish(ex: ChildExecutor[dict[str, object]], limit_s: float = 30.0) -> Outcome:
    for _ in range(int(limit_s / 0.05)):
        if (outcome := ex.wait(0.05)) is not None:
            return outcome
    raise AssertionError(f"no outcome within {limit_s} s")


def run(ex: ChildExecutor[dict[str, object]], data: bytes, **options: object) -> Outcome:
    ex.start(Task("t" * 64, "w" * 64, data, "any", 0, options))
    return finish(ex)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not): its state in /proc, after the command's ")"."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_a_task_streams_and_ends_with_its_outcome(executor: ChildExecutor[dict[str, object]]) -> None:
    pid = executor.child_pid
    outcome = run(executor, b"ok")
    assert outcome.status is ExitKind.OK and dict(outcome.trace) == {7: 1} and outcome.execs == 2
    assert outcome.candidates == ()  # the handler's outcome is the task's; Found is progress only
    assert executor.child_pid == pid  # the same warm child serves the next task
    assert run(executor, b"ok").status is ExitKind.OK


def test_a_dead_child_is_replaced(executor: ChildExecutor[dict[str, object]]) -> None:
    pid = executor.child_pid
    died = run(executor, b"die")
    assert died.status is ExitKind.CRASH and died.error == "exited with status 3 in input"
    assert executor.child_pid not in (None, pid) and not alive(pid)
    idle = executor.child_pid
    assert idle is not None
    os.kill(idle, signal.SIGKILL)  # dies while idle: the next start replaces it
    time.sleep(0.1)
    assert run(executor, b"ok").status is ExitKind.OK
    assert executor.child_pid not in (None, idle)


def test_a_deadline_kills_the_process_group(executor: ChildExecutor[dict[str, object]],
                                            tmp_path: Path) -> None:
    pid_file = tmp_path / "helper.pid"
    executor.start(Task("t" * 64, "w" * 64, b"hang", "any", 0, {"pid_file": str(pid_file)}))
    child = executor.child_pid
    assert child is not None
    outcome = finish(executor)
    assert outcome.status is ExitKind.HANG and outcome.error == "killed in input"
    helper = int(pid_file.read_text())
    time.sleep(0.1)
    assert not alive(child) and not alive(helper)  # the helper shared the child's group
    assert executor.child_pid not in (None, child)
    assert run(executor, b"ok").status is ExitKind.OK


@pytest.mark.parametrize("kind", [b"garbage", b"stop", b"fields"])
def test_a_malformed_child_message_is_a_loud_error(executor: ChildExecutor[dict[str, object]],
                                                   kind: bytes) -> None:
    child = executor.child_pid
    with structlog.testing.capture_logs() as logs:
        outcome = run(executor, kind)
    assert outcome.status is ExitKind.ERROR and "malformed message" in outcome.error
    assert outcome.stats["child_restarts"] == 1
    assert [e["event"] for e in logs] == ["child.protocol_error"] and logs[0]["log_level"] == "error"
    assert child is not None and not alive(child) and executor.child_pid != child
    assert run(executor, b"ok").status is ExitKind.OK


def test_bad_options_abort_and_close(executor: ChildExecutor[dict[str, object]], tmp_path: Path) -> None:
    bad = run(executor, b"ok", bad=1)
    assert bad.status is ExitKind.ERROR and bad.error == "option bad: no"
    executor.start(Task("t" * 64, "w" * 64, b"hang", "any", 0, {"pid_file": str(tmp_path / "p")}))
    with pytest.raises(RuntimeError):
        executor.start(Task("t" * 64, "w" * 64, b"ok", "any"))
    child = executor.child_pid
    executor.abort()
    assert executor.wait(0.05) is None and executor.child_pid != child
    last = executor.child_pid
    assert last is not None
    executor.close()
    time.sleep(0.05)
    assert not alive(last) and not alive(child or 0)
    with pytest.raises(RuntimeError):
        executor.start(Task("t" * 64, "w" * 64, b"ok", "any"))


# -- the codec ------------------------------------------------------------------------------

MESSAGES: list[wire.Message] = [
    wire.RunTask(Task("a" * 64, "b" * 64, b"\x00\xff", "m:f", 3, {"x": 1, "y": [1.5, "z"], "b": True}, 2),
                 ("/p", ""), (b"1", b"")),
    wire.Stop(), wire.Ready(42), wire.Accepted(),
    wire.Entered(Phase.CANDIDATE, b"in", 5, 12.5, 3),
    wire.InputTraced({0: 1, 65535: 200}),
    wire.Found(Candidate(b"c", {3: 1}, ExitKind.HANG, 4, "slow")),
    wire.SubGroup(0), wire.Executed(1, ExitKind.CRASH, {}, "Traceback"), wire.Counted(10 ** 12),
    wire.Done(Outcome(ExitKind.OK, {1: 2}, (Candidate(b"x", {}),), 1.0, 0.5, 0.25, 3, "", {"sat": 1},
                      (b"tok",))),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message: wire.Message) -> None:
    assert wire.decode(wire.encode(message)) == message


@pytest.mark.parametrize("frame", [
    b"", b"\xc1", msgpack.packb("ready"), msgpack.packb([]), msgpack.packb(["nope"]),
    msgpack.packb(["ready"]), msgpack.packb(["ready", 1, 2]), msgpack.packb(["ready", True]),
    msgpack.packb(["ready", "1"]), msgpack.packb(["entered", "sideways", b"", 0, 0.0, -1]),
    msgpack.packb(["input_traced", {"1": 1}]), msgpack.packb(["counted", 1.5]),
    msgpack.packb(["entered", "input", b"", 0, float("nan"), -1]),
    msgpack.packb(["done", ["ok", {}, [], 0.0, 0.0, 0.0, 0, "", {}]]),  # an Outcome one field short
    msgpack.packb(["found", [b"c", {}, "boom", 0, ""]]),
], ids=repr)
def test_decoding_is_strict(frame: bytes) -> None:
    with pytest.raises(wire.ChildProtocolError):
        wire.decode(frame)
