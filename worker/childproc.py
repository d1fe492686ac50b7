"""The parent side of every engine's child process: spawn, talk, enforce deadlines, replace.

``ChildProcess`` is one child running the serve loop (``python -m symfence.worker.childserve
ENGINE ...``) in its own session, in the environment of ``protocol.childenv`` (nothing added to
its module search path), speaking ``worker.childwire`` over two pipes. Killing it kills its
whole process group (and a helper's group it reported), so nothing the target started
survives.

``ChildExecutor`` is the one ``Executor`` over such a child: it hands a task over (replacing a
child that died while idle), rebuilds where the task is from the child's stream, owns the
clock (the engine adapter says what each phase may take; past it the group is SIGKILLed and a
fresh child started) and turns a death, a kill or a malformed message into an ``Outcome`` (the
adapter says which, from the phase). An engine plugs in with an ``EngineAdapter`` of a few
hooks; see docs/design.md, "Executors".
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Generic, Protocol, TypeVar

import structlog

from symfence.protocol.childenv import child_env
from symfence.worker import childwire as wire
from symfence.worker.engine_api import Candidate, ExitKind, Outcome, Phase, Task

log = structlog.get_logger()

# A child asked to end its task early (end_turn) that has not answered this long after is
# ended like one past its deadline: a z3 call can ignore its time-out and z3's own interrupt
# for many seconds (seen: email-validator's string queries), and the campaign waits on it.
CUT_GRACE_S = 1.0
DISCARD = "discard"  # stderr: to /dev/null
INHERIT = "inherit"  # stderr: the worker's own
SCRATCH = "scratch"  # stderr: a file in the child's scratch directory (``stderr_tail``)


class ChildProcess:
    """One engine child process and the two pipe ends the parent holds."""

    def __init__(self, engine: str, *, python: str | None = None, stderr: str = DISCARD,
                 scratch: bool = False, fatal_file: bool = True) -> None:
        self.engine = engine
        short = engine.rsplit(".", 1)[-1]
        self.scratch_dir = tempfile.mkdtemp(prefix=f"symfence-{short}-") if scratch else ""
        self.stderr_path = os.path.join(self.scratch_dir, "child.stderr") if stderr == SCRATCH else ""
        self.returncode: int | None = None
        self.cpu_s = 0.0  # user + system CPU of the child, once reaped
        # faulthandler's dump when a fatal signal kills the child (C code of the target or of a
        # library): the Python stack it died in, which `died` adds to the task's detail. Not for
        # the fuzz process (`fatal_file=False`): enabled before libFuzzer's own handlers, it would
        # lose to them; that process enables it itself, after them, into its log.
        self._fatal = tempfile.TemporaryFile(prefix="symfence-fatal-") if fatal_file else None  # noqa: SIM115
        fatal_args = [str(self._fatal.fileno())] if self._fatal is not None else []
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        err: Any = None
        try:
            if stderr == DISCARD:
                err = subprocess.DEVNULL
            elif stderr != INHERIT:
                err = open(self.stderr_path or stderr, "ab")  # noqa: SIM115 - closed below
            self._proc = subprocess.Popen(
                [python or sys.executable, "-m", "symfence.worker.childserve", engine, str(to_r),
                 str(from_w), self.scratch_dir, *fatal_args],
                pass_fds=(to_r, from_w, *map(int, fatal_args)), env=child_env(), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        except BaseException:
            os.close(to_w)
            os.close(from_r)
            if self._fatal is not None:
                self._fatal.close()
            self._remove_scratch()
            raise
        finally:
            os.close(to_r)
            os.close(from_w)
            if err not in (None, subprocess.DEVNULL):
                err.close()
        self.pid = self._proc.pid
        self._outbox = Connection(to_w, readable=False)
        self._inbox = Connection(from_r, writable=False)
        self._closed = False

    # -- talking ------------------------------------------------------------------------------

    def send(self, message: wire.ToChild) -> None:
        """Raises ``BrokenPipeError``/``ConnectionResetError``/``OSError`` if the child is gone."""
        self._outbox.send_bytes(wire.encode(message))

    def poll(self, timeout_s: float) -> bool:
        """Whether a message (or the end of the stream) is waiting, within ``timeout_s``."""
        return self._inbox.poll(max(0.0, timeout_s))

    def recv(self) -> wire.FromChild:
        """The next message; ``EOFError``/``OSError`` once the child is gone,
        ``ChildProtocolError`` for a frame that is not a valid child message."""
        message = wire.decode(self._inbox.recv_bytes(wire.MAX_FRAME_BYTES))
        if isinstance(message, (wire.RunTask, wire.Stop)):
            raise wire.ChildProtocolError(f"a child sent a parent's message: {message!r:.80}")
        return message

    # -- its life -----------------------------------------------------------------------------

    def exited(self, block: bool = False) -> int | None:
        """The exit code (negative: killed by that signal) once the child ended, else None."""
        if self.returncode is None:
            try:
                pid, status, usage = os.wait4(self.pid, 0 if block else os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                pid, status, usage = self.pid, 0, None
                self.returncode = -signal.SIGKILL
            if pid:
                if usage is not None:
                    self.returncode = os.waitstatus_to_exitcode(status)
                    self.cpu_s = usage.ru_utime + usage.ru_stime
                self._proc.returncode = self.returncode
        return self.returncode

    def alive(self) -> bool:
        return self.exited() is None

    def how_it_ended(self, wait_s: float = 1.0) -> str:
        """After its stream closed: reap the child (killing it if it lingers), say how it ended."""
        deadline = time.monotonic() + wait_s
        while self.exited() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        if self.returncode is None:
            self.kill_group()
            self.exited(block=True)
            return "closed its pipe"
        return describe_exit(self.returncode)

    def kill_group(self, extra_pgid: int = 0) -> None:
        """SIGKILL the child's process group and ``extra_pgid`` (a helper's own group)."""
        for pgid in (self.pid, extra_pgid):
            if pgid:
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def close(self, extra_pgid: int = 0) -> None:
        """Kill the group, reap the child, close the pipes and remove the scratch directory."""
        if self._closed:
            return
        self._closed = True
        self.kill_group(extra_pgid)
        self.exited(block=True)
        self._inbox.close()
        self._outbox.close()
        if self._fatal is not None:
            self._fatal.close()
        self._remove_scratch()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Ask an idle child to stop, give it ``timeout_s``, then ``close``."""
        try:
            self.send(wire.Stop())
            deadline = time.monotonic() + timeout_s
            while self.exited() is None and time.monotonic() < deadline:
                time.sleep(0.005)
        except OSError:
            pass
        self.close()

    def stderr_tail(self, size: int = 4000) -> bytes:
        try:
            with open(self.stderr_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - size))
                return fh.read()
        except OSError:
            return b""

    def fatal_report(self, size: int = 8000) -> str:
        """What faulthandler wrote when a fatal signal killed the child ("" if none): "Fatal
        Python error: Segmentation fault" and the stack of each thread, the current one first."""
        if self._fatal is None:
            return ""
        try:
            return os.pread(self._fatal.fileno(), size, 0).decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def _remove_scratch(self) -> None:
        if self.scratch_dir:
            shutil.rmtree(self.scratch_dir, ignore_errors=True)


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


# -- one Executor for every engine that runs tasks in a child --------------------------------

OptionsT = TypeVar("OptionsT")  # an engine's parsed options


@dataclass
class Running(Generic[OptionsT]):
    """Parent-side view of the task in flight, rebuilt from the child's stream."""

    task: Task
    options: OptionsT
    started: float
    phase: Phase = Phase.QUEUED
    phase_since: float = 0.0
    accepted_at: float = 0.0
    data: bytes = b""  # the input of the execution in progress (INPUT / CANDIDATE)
    bound: int = 0
    sub_pgid: int = 0
    input_trace: dict[int, int] = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)
    execs: int = 0
    ready: Outcome | None = None  # decided without the child (bad options, hand-over failed)
    cut_at: float = 0.0  # end_turn asked the child to end the task early (monotonic), 0 = not


class EngineAdapter(Protocol[OptionsT]):
    """What one engine tells ``ChildExecutor``: its child module and how to read its phases."""

    engine: str  # the child side: a module with ``handler(scratch_dir) -> childserve.Handler``
    name: str  # for messages: "concolic", "native", ...
    stderr: str  # DISCARD, INHERIT or SCRATCH
    scratch: bool  # give each child a private scratch directory
    eager: bool  # start the first child at once (warm before the first task)
    start_timeout_s: float

    def options(self, task: Task) -> OptionsT:
        """The task's options parsed; ``ValueError`` makes the task an ERROR without the child."""
        ...

    def deadline(self, run: Running[OptionsT]) -> float:
        """When the parent kills the child if the task is still in its current phase (any phase
        after QUEUED: until the child accepts the task, ``start_timeout_s`` applies)."""
        ...

    def killed(self, run: Running[OptionsT]) -> Outcome:
        """The outcome of a task whose child was killed at its deadline."""
        ...

    def died(self, run: Running[OptionsT], how: str, child: ChildProcess) -> Outcome:
        """The outcome of a task whose child died on its own (``how``: "exited with status 3")."""
        ...


class ChildExecutor(Generic[OptionsT]):
    """The Executor of an engine that runs its tasks in a long-lived child; see the module docstring."""

    def __init__(self, adapter: EngineAdapter[OptionsT], *, python: str | None = None,
                 one_task_per_child: bool = False) -> None:
        """``one_task_per_child``: stop the child after each task and start the next one in a
        fresh process (an engine whose tasks must not share a target's state, e.g. minimize)."""
        self._adapter = adapter
        self._python = python or sys.executable
        self._one_task = one_task_per_child
        self._running: Running[OptionsT] | None = None
        self._closed = False
        self._child: ChildProcess | None = self._spawn() if adapter.eager else None

    @property
    def child_pid(self) -> int | None:
        """Process id of the current child (None if none is running)."""
        return self._child.pid if self._child is not None else None

    def __enter__(self) -> ChildExecutor[OptionsT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- Executor protocol --------------------------------------------------------------------

    def start(self, task: Task) -> None:
        if self._closed:
            raise RuntimeError("executor is closed")
        if self._running is not None:
            raise RuntimeError("a task is already running")
        try:
            options = self._adapter.options(task)
        except ValueError as exc:
            self._running = Running(task, None, time.monotonic(),  # type: ignore[arg-type]
                                    ready=Outcome(ExitKind.ERROR, error=str(exc)))
            return
        run = Running(task, options, time.monotonic())
        self._running = run
        message = wire.RunTask(task, tuple(sys.path))
        for attempt in range(2):
            try:
                if attempt or self._child is None or not self._child.alive():
                    self._replace_child()
                if self._child is None:
                    self._child = self._spawn()  # raises if it cannot
                self._child.send(message)
                return
            except (BrokenPipeError, ConnectionResetError):
                continue  # it died while idle: replace it and try once more
            except Exception as exc:  # noqa: BLE001 - cannot spawn, cannot encode, ...
                run.ready = Outcome(ExitKind.ERROR, error=f"cannot hand the task over: {exc!r}")
                return
        run.ready = Outcome(ExitKind.ERROR,
                            error=f"{self._adapter.name} child process keeps dying at start")

    def wait(self, timeout_s: float) -> Outcome | None:
        run = self._running
        if run is None:
            return None
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            outcome = run.ready or self._drain(run) or self._enforce(run)
            if outcome is not None:
                self._running = None
                if self._one_task:
                    self._retire_child()
                return outcome
            now = time.monotonic()
            if now >= deadline:
                return None
            assert self._child is not None  # _drain returns an outcome when there is none
            self._child.poll(min(deadline - now, max(0.0, self._deadline(run) - now) + 0.001))

    def end_turn(self) -> bool:
        """Ask the child to end its task early with what it found so far (``engine_api.Turns``):
        only an engine whose child takes the request (``adapter.cuttable``: SIGUSR1, see
        ``worker.concolic.cut``), and only once the child runs the task (past LOADING: the child
        clears the request when a task starts, so one sent earlier would be lost)."""
        run, child = self._running, self._child
        if not getattr(self._adapter, "cuttable", False) or run is None or run.ready is not None \
                or run.phase in (Phase.QUEUED, Phase.LOADING) or child is None:
            return False
        try:
            os.kill(child.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return False
        run.cut_at = run.cut_at or time.monotonic()
        return True

    def abort(self) -> None:
        run, self._running = self._running, None
        if run is not None:
            self._replace_child(run.sub_pgid)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        run, self._running = self._running, None
        child, self._child = self._child, None
        if child is None:
            return
        if run is None and child.alive():
            child.stop()
        else:
            child.close(run.sub_pgid if run is not None else 0)

    # -- the child's stream -------------------------------------------------------------------

    def _drain(self, run: Running[OptionsT]) -> Outcome | None:
        """Handle every message already waiting; an outcome if the task ended (or the child did)."""
        child = self._child
        if child is None:
            return Outcome(ExitKind.ERROR, error=f"{self._adapter.name} child process could not be started")
        while True:
            try:
                if not child.poll(0):
                    return None
                message = child.recv()
            except (EOFError, OSError):
                ended = self._adapter.died(run, child.how_it_ended(), child)
                self._replace_child(run.sub_pgid)
                return ended
            except wire.ChildProtocolError as exc:
                return self._broken(run, str(exc))
            try:
                outcome = self._handle(run, message)
            except wire.ChildProtocolError as exc:
                return self._broken(run, str(exc))
            if outcome is not None:
                return outcome

    def _handle(self, run: Running[OptionsT], message: wire.FromChild) -> Outcome | None:
        now = time.monotonic()
        if isinstance(message, wire.Accepted):
            run.phase, run.accepted_at, run.phase_since = Phase.LOADING, now, now
        elif isinstance(message, wire.Entered):
            run.phase, run.phase_since = message.phase, message.since or now
            run.data, run.bound = message.data, message.bound
            run.execs += message.phase in (Phase.INPUT, Phase.CANDIDATE)
        elif isinstance(message, wire.InputTraced):
            run.phase, run.phase_since, run.input_trace = Phase.ENGINE, now, dict(message.trace)
        elif isinstance(message, wire.Found):
            run.phase, run.phase_since = Phase.ENGINE, now
            run.candidates.append(message.candidate)
        elif isinstance(message, wire.SubGroup):
            run.sub_pgid = message.pgid
        elif isinstance(message, wire.Done):
            return message.outcome
        elif not isinstance(message, wire.Ready):
            raise wire.ChildProtocolError(f"{type(message).__name__} is not part of a task's stream")
        return None

    def _broken(self, run: Running[OptionsT], why: str) -> Outcome:
        """A malformed message: the child is not trusted further (killed, replaced), loudly."""
        log.error("child.protocol_error", engine=self._adapter.name, pid=self.child_pid, error=why)
        self._replace_child(run.sub_pgid)
        return Outcome(ExitKind.ERROR, trace=run.input_trace, candidates=tuple(run.candidates),
                       wall_s=time.monotonic() - run.started, execs=run.execs, stats={"child_restarts": 1},
                       error=f"{self._adapter.name} child process sent a malformed message: {why}")

    # -- the clock ----------------------------------------------------------------------------

    def _deadline(self, run: Running[OptionsT]) -> float:
        if run.phase is Phase.QUEUED:  # the child may still be starting (imports, a warm-up)
            return run.started + self._adapter.start_timeout_s
        if run.cut_at:  # asked to end early: a child that does not, is ended (adapter.killed)
            return min(self._adapter.deadline(run), run.cut_at + CUT_GRACE_S)
        return self._adapter.deadline(run)

    def _enforce(self, run: Running[OptionsT]) -> Outcome | None:
        if time.monotonic() < self._deadline(run):
            return None
        self._replace_child(run.sub_pgid)  # the group first, so nothing runs on meanwhile
        return self._adapter.killed(run)

    # -- children -----------------------------------------------------------------------------

    def _spawn(self) -> ChildProcess:
        a = self._adapter
        return ChildProcess(a.engine, python=self._python, stderr=a.stderr, scratch=a.scratch)

    def _retire_child(self) -> None:
        """Stop the idle child; ``start`` spawns a fresh one for the next task."""
        child, self._child = self._child, None
        if child is not None:
            child.stop()

    def _replace_child(self, sub_pgid: int = 0) -> None:
        """Kill the current child and start a fresh one (left None if that fails, or until the
        next task with ``one_task_per_child``; ``start`` retries and turns a failure into an
        ERROR outcome)."""
        if self._child is not None:
            self._child.close(sub_pgid)
            self._child = None
        if self._one_task:
            return  # ``start`` spawns the next task's child
        try:
            self._child = self._spawn()
        except OSError:
            log.warning("child.spawn_failed", engine=self._adapter.name, error=traceback.format_exc(limit=1))
            self._child = None
