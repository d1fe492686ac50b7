"""The concolic Executor: runs tasks in a long-lived child process that may crash, hang or be killed.

One child per executor (``python -m symfence.worker.concolic.runner``) keeps the engine, its solved-query
memo and the instrumented targets warm, so an execution costs a function call, not an
interpreter. The child limits each execution itself (``setitimer``) and streams what it is
doing; the parent only polls the pipe, and as a backstop kills and replaces the child when an
execution or the whole task overruns its budget, or notices when it died. Then the outcome is
built from the stream: dying or being killed while running the task's own input is that
input's CRASH or HANG; while replaying a child input, that child becomes a CRASH/HANG candidate
and the task ends OK with the candidates so far; anywhere else it is an ERROR.
``abort`` kills the child and starts a fresh one (replacement costs ~0.2 s, off the hot path).
MPI launcher variables are removed from the child's environment so it never joins the job.
"""

from __future__ import annotations

import enum
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from typing import Any

from symfence.worker.concolic.options import EngineOptions
from symfence.worker.executors.base import CandidateOut, ExitKind, Outcome, Task
from symfence.worker.executors.childenv import child_env



class _Phase(enum.Enum):
    QUEUED = "queued"  # sent, not yet picked up (the child may still be starting)
    LOADING = "loading"  # picked up, the input has not started (target import, options)
    INPUT = "input"  # executing the task's own input concretely
    ENGINE = "engine"  # symbolic run, solving, or between replays
    CANDIDATE = "candidate"  # replaying a generated child input


@dataclass
class _Running:
    """Parent-side view of the task in flight, rebuilt from the child's progress stream."""

    task: Task
    options: EngineOptions
    started: float
    phase: _Phase = _Phase.QUEUED
    phase_since: float = 0.0
    accepted_at: float = 0.0
    exec_data: bytes = b""
    exec_bound: int = 0
    input_trace: dict[int, int] = field(default_factory=dict)
    candidates: list[CandidateOut] = field(default_factory=list)
    execs: int = 0
    ready: Outcome | None = None  # decided without the child (bad options, unpicklable task)


class _Child:
    """One runner process and the two pipe ends the parent holds."""

    def __init__(self, python: str, quiet: bool):
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [python, "-m", "symfence.worker.concolic.runner", str(to_child_r), str(from_child_w)],
                pass_fds=(to_child_r, from_child_w), env=child_env(),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL if quiet else None, start_new_session=True,
            )
        except BaseException:
            for fd in (to_child_w, from_child_r):
                os.close(fd)
            raise
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.outbox = Connection(to_child_w, readable=False)
        self.inbox = Connection(from_child_r, writable=False)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.inbox.close()
        self.outbox.close()

    def how_it_ended(self) -> str:
        """Reap the process after its pipe closed (killing it if it lingers) and say how it ended."""
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "closed its pipe"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with status {code}"


class ConcolicExecutor:
    """Executor for the embedded concolic engine; see the module docstring."""

    def __init__(self, *, python: str | None = None, quiet: bool = True,
                 start_timeout_s: float = 60.0):
        self._python = python or sys.executable
        self._quiet = quiet
        self._start_timeout_s = start_timeout_s
        self._running: _Running | None = None
        self._closed = False
        self._child: _Child | None = _Child(self._python, self._quiet)

    @property
    def child_pid(self) -> int | None:
        """Process id of the current child (None if starting a new one failed)."""
        return self._child.proc.pid if self._child is not None else None

    def __enter__(self) -> ConcolicExecutor:
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
            options = EngineOptions.from_mapping(task.options)
        except ValueError as exc:
            options = EngineOptions()
            self._running = _Running(task, options, time.monotonic(),
                                     ready=Outcome(ExitKind.ERROR, error=str(exc)))
            return
        run = _Running(task, options, time.monotonic())
        self._running = run
        message = ("task", replace(task, options=dict(task.options)), list(sys.path))
        for attempt in range(2):
            try:
                if attempt or self._child is None or not self._child.alive():
                    self._replace_child()
                if self._child is None:
                    self._child = _Child(self._python, self._quiet)  # raises if it cannot
                self._child.outbox.send(message)
                return
            except (BrokenPipeError, ConnectionResetError):
                continue  # it died while idle: replace it and try once more
            except Exception as exc:  # noqa: BLE001 - unpicklable options, cannot spawn, ...
                run.ready = Outcome(ExitKind.ERROR, error=f"cannot hand the task over: {exc!r}")
                return
        run.ready = Outcome(ExitKind.ERROR, error="concolic child process keeps dying at start")

    def wait(self, timeout_s: float) -> Outcome | None:
        run = self._running
        if run is None:
            return None
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            outcome = run.ready or self._drain(run) or self._enforce_budget(run)
            if outcome is not None:
                self._running = None
                return outcome
            now = time.monotonic()
            if now >= deadline:
                return None
            next_check = max(0.0, self._budget_deadline(run) - now) + 0.001
            assert self._child is not None
            self._child.inbox.poll(min(deadline - now, next_check))

    def abort(self) -> None:
        if self._running is None:
            return
        self._running = None
        self._replace_child()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        child, self._child = self._child, None
        if child is None:
            return
        if self._running is None and child.alive():
            try:
                child.outbox.send(("stop",))
                child.proc.wait(timeout=2.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._running = None
        child.kill()

    # -- the child's progress stream ----------------------------------------------------------

    def _drain(self, run: _Running) -> Outcome | None:
        """Handle every message already waiting; an outcome if the task ended (or the child did)."""
        assert self._child is not None  # a task is only running while its child exists
        child = self._child
        while True:
            try:
                if not child.inbox.poll(0):
                    return None
                message = child.inbox.recv()
            except (EOFError, OSError):
                how = child.how_it_ended()
                self._replace_child()
                return self._cut_short(run, f"died ({how})", killed=False)
            except Exception as exc:  # noqa: BLE001 - a torn or unreadable frame
                self._replace_child()
                return self._cut_short(run, f"sent an unreadable message ({exc!r})", killed=False)
            outcome = self._handle(run, message)
            if outcome is not None:
                return outcome

    def _handle(self, run: _Running, message: tuple[Any, ...]) -> Outcome | None:
        kind = message[0]
        if kind == "accepted":
            run.phase, run.accepted_at = _Phase.LOADING, time.monotonic()
        elif kind == "exec":
            _, since, data, bound, is_input = message
            run.phase = _Phase.INPUT if is_input else _Phase.CANDIDATE
            run.phase_since, run.exec_data, run.exec_bound = since, data, bound
            run.execs += 1
        elif kind == "input":
            run.phase, run.input_trace = _Phase.ENGINE, message[1]
        elif kind == "candidate":
            run.phase = _Phase.ENGINE
            run.candidates.append(message[1])
        elif kind == "confirming":  # findings replayed on the plain target (engine.py)
            run.phase = _Phase.ENGINE
        elif kind == "done":
            return message[1]
        return None  # "ready" and anything unknown

    # -- backstop -----------------------------------------------------------------------------

    def _budget_deadline(self, run: _Running) -> float:
        opts = run.options
        if run.phase is _Phase.QUEUED:
            return run.started + self._start_timeout_s
        deadline = run.accepted_at + opts.task_budget_s()
        if run.phase in (_Phase.INPUT, _Phase.CANDIDATE):
            grace = max(1.0, opts.exec_timeout_s)
            deadline = min(deadline, run.phase_since + opts.exec_timeout_s + grace)
        return deadline

    def _enforce_budget(self, run: _Running) -> Outcome | None:
        if time.monotonic() < self._budget_deadline(run):
            return None
        phase = run.phase
        self._replace_child()
        if phase in (_Phase.INPUT, _Phase.CANDIDATE):
            reason = f"execution overran {run.options.exec_timeout_s:g} s"
        else:
            reason = f"task overran its {phase.value} budget"
        return self._cut_short(run, f"was killed: {reason}", killed=True)

    def _cut_short(self, run: _Running, how: str, *, killed: bool) -> Outcome:
        """The outcome of a task whose child process died or was killed, from what it streamed."""
        stats = {"child_restarts": 1}
        wall = time.monotonic() - run.started
        exit_kind = ExitKind.HANG if killed else ExitKind.CRASH
        if run.phase is _Phase.INPUT:
            return Outcome(exit_kind, wall_s=wall, execs=run.execs, stats=stats,
                           error=f"target process {how} while executing the input")
        if run.phase is _Phase.CANDIDATE:
            detail = f"target process {how} while executing this input"
            lost = CandidateOut(run.exec_data, {}, exit_kind, run.exec_bound, detail)
            return Outcome(ExitKind.OK, trace=run.input_trace,
                           candidates=(*run.candidates, lost), wall_s=wall, execs=run.execs,
                           stats=stats)
        return Outcome(ExitKind.ERROR, trace=run.input_trace, candidates=tuple(run.candidates),
                       wall_s=wall, execs=run.execs, stats=stats,
                       error=f"concolic child process {how} ({run.phase.value} phase)")

    def _replace_child(self) -> None:
        """Kill the current child and start a fresh one (left None if that fails; ``start``
        retries and turns a failure into an ERROR outcome)."""
        if self._child is not None:
            self._child.kill()
            self._child = None
        try:
            self._child = _Child(self._python, self._quiet)
        except OSError:
            self._child = None
