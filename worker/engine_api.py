"""The engine seam's vocabulary: a task, how it ended, what it found, and what runs it.

Every engine (concolic, fuzz slices, native, the real tracer, synthetic) and every executor
speaks these types and nothing engine-specific: the worker loop hands an ``Executor`` a
``Task`` and takes back an ``Outcome``. This module imports nothing of symfence but
``protocol.messages`` (for the status enum), so engines and executors both depend on it and
never on each other. The child-process half of the seam is ``worker.childwire`` (the messages),
``worker.childproc`` (the parent side) and ``worker.childserve`` (the child side).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from symfence.protocol.messages import Status

# How one execution (or one task) ended; the same enum as the wire's status.
ExitKind = Status


@dataclass(frozen=True)
class Task:
    """One unit of work handed to an executor (the worker strips the MPI envelope)."""

    token: str  # dispatch token; executors must not interpret it
    work_id: str
    data: bytes
    target: str  # executor-specific, e.g. "examples.magic_header:target" for concolic
    bound: int = 0  # generational-search bound (SAGE): flip branches with index >= bound
    options: Mapping[str, Any] = field(default_factory=dict)
    attempt: int = 1  # which dispatch of this work_id this is (retries after expiry count up)


@dataclass(frozen=True)
class Candidate:
    """A new input produced by a task, already replayed concretely by the executor."""

    data: bytes
    trace: Mapping[int, int]  # edge index (0..65535) -> raw hit count, from the concrete replay
    kind: ExitKind = ExitKind.OK  # a candidate whose replay crashed or hung is a finding
    bound: int = 0  # bound for the child work item (generational search: flipped index + 1)
    detail: str = ""  # traceback text for a crash, reason for a hang


CandidateOut = Candidate  # the name the engines were written against


@dataclass(frozen=True)
class Outcome:
    """What one task produced. Every field is plain data so it can cross a process boundary."""

    status: ExitKind
    trace: Mapping[int, int] = field(default_factory=dict)  # coverage of the task's own input
    candidates: tuple[Candidate, ...] = ()
    wall_s: float = 0.0
    cpu_s: float = 0.0
    solver_s: float = 0.0
    execs: int = 0  # concrete + symbolic executions of the target performed for this task
    error: str = ""  # traceback / message for CRASH (of the input itself) or ERROR
    stats: Mapping[str, int] = field(default_factory=dict)  # executor counters (queries, unsat, ...)
    tokens: tuple[bytes, ...] = ()  # comparison constants seen (concolic): the fuzzer's dictionary
    # The task ended early (a cut: ``Turns.end_turn``) with branches at and past this index not
    # yet tried: the campaign runs the input again with this bound. None: it ran to its end.
    resume_at: int | None = None


class Phase(enum.Enum):
    """Where a task running in a child process is, as the child last said (``childwire.Entered``)."""

    QUEUED = "queued"  # sent, not yet picked up (the child may still be starting)
    LOADING = "loading"  # picked up, the input has not started (target import, options)
    INPUT = "input"  # executing the task's own input concretely
    ENGINE = "engine"  # symbolic run, solving, or between replays
    CANDIDATE = "candidate"  # replaying a generated child input


class ExecTimeout(BaseException):
    """Raised inside a target that exceeded its time limit (a ``BaseException``, so a target's
    ``except Exception`` does not swallow it)."""


class TargetLoadError(Exception):
    """The target spec cannot be imported or does not name a callable: the task's ERROR."""


class Executor(Protocol):
    """Runs one task at a time. The worker loop polls it so it can keep serving MPI meanwhile.

    - ``start`` begins a task (never called while one is running).
    - ``wait`` blocks for at most ``timeout_s`` and returns the Outcome when the task is done,
      else None. It must never raise because of the target: target exceptions are CRASH,
      target time-outs are HANG, executor failures are ERROR outcomes.
    - ``abort`` stops the running task as fast as possible (CANCEL from the coordinator);
      afterwards ``wait`` returns None until the next ``start``.
    - ``close`` releases processes/files; called once at worker exit.
    """

    def start(self, task: Task) -> None: ...

    def wait(self, timeout_s: float) -> Outcome | None: ...

    def abort(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Turns(Protocol):
    """An executor whose task is a turn of open-ended work (a fuzz turn): it can end early.

    ``end_turn`` asks the running turn to answer soon (a fuzz turn: once it has run a second)
    with what it has done so far, as a normal outcome (not a cancel); it returns False when no turn is running or the turn
    cannot end yet (a process still starting). The worker calls it when a short task waits that
    the campaign waits on (``protocol.messages.RERUN_BOUND``)."""

    def end_turn(self) -> bool: ...
