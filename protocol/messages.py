"""Wire message types: frozen dataclasses for WORK, RESULT and CONTROL, and the MPI tags."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping

from symfence.protocol.ids import DispatchToken, WorkId

PROTOCOL_VERSION = 1
# A WORK whose bound is at least this re-executes its input and explores nothing (a claimed
# crash's or hang's confirmation): a short task the campaign waits on. A worker runs it ahead of
# its queue and ends a running fuzz turn early for it (worker/loop.py).
RERUN_BOUND = 1 << 31


class Tag(enum.IntEnum):
    """MPI tags. One tag per message family so a receiver can probe for what it wants."""

    WORK = 11
    RESULT = 12
    CONTROL = 13
    PEER = 14  # worker-to-worker, only on the fault injector's separate communicator


class Status(str, enum.Enum):
    """How a task (or one execution of a target) ended. Values are the wire strings."""

    OK = "ok"
    CRASH = "crash"
    HANG = "hang"
    ERROR = "error"


class ControlKind(str, enum.Enum):
    HELLO = "hello"  # worker -> coordinator, once at start
    SETUP = "setup"  # coordinator -> worker, its settings (faults, heartbeat, log dir, files to check)
    HEARTBEAT = "heartbeat"  # worker -> coordinator, lists held tokens; coordinator -> worker: "still here"
    CANCEL = "cancel"  # coordinator -> worker, tokens to drop or abort
    STOP = "stop"  # coordinator -> worker
    STOP_ACK = "stop_ack"  # worker -> coordinator, with the worker's own totals
    CHECKED = "checked"  # worker -> coordinator, after SETUP: its host, its log's path, the first bad file
    LOG = "log"  # worker -> coordinator, one of its warnings or errors (worker/logforward.py)
    YIELD = "yield"  # coordinator -> worker, the campaign is ending: each task answers as soon as it can


@dataclass(frozen=True)
class Work:
    """One dispatch: what to execute, named by the token of this delivery."""

    token: DispatchToken
    work_id: WorkId
    data: bytes
    sha256: str
    executor: str
    target: str
    bound: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)
    deadline_s: float = 0.0  # budget for this dispatch, 0 = none (informational for the worker)
    cov_version: int = 0  # coverage-map version after applying cov_delta
    cov_delta: bytes = b""  # packed sparse map changes since the worker's last version
    attempt: int = 1  # 1 for the first dispatch of this work_id, 2 for its first retry, ...


@dataclass(frozen=True)
class Candidate:
    """A new input a task produced, with the worker's coverage verdict."""

    data: bytes
    sha256: str
    trace: bytes = b""  # packed edge trace of its concrete replay (protocol.coverage.pack_trace)
    kind: Status = Status.OK  # CRASH / HANG: the candidate itself is a finding
    bound: int = 0
    new_bits: int = 0  # worker's verdict against its map copy: 0 none, 1 hit count, 2 new edge
    detail: str = ""


@dataclass(frozen=True)
class Cost:
    wall_s: float = 0.0
    cpu_s: float = 0.0
    solver_s: float = 0.0
    execs: int = 0


@dataclass(frozen=True)
class Result:
    """The answer to one WORK, echoing its token."""

    token: DispatchToken
    work_id: WorkId
    status: Status
    candidates: tuple[Candidate, ...] = ()
    cost: Cost = Cost()
    cov_version: int = 0
    trace: bytes = b""  # packed edge trace of the task's own input
    error: str = ""
    stats: Mapping[str, int] = field(default_factory=dict)
    tokens: tuple[bytes, ...] = ()  # comparison constants the engine saw (the fuzzer's dictionary)
    # The task was cut short (a re-run waited, or the drain): run its input again with this bound
    # (the first branch it did not try). None: it ran to its end. On the wire only when set.
    resume_at: int | None = None


@dataclass(frozen=True)
class Control:
    kind: ControlKind
    tokens: tuple[DispatchToken, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict)


Message = Work | Result | Control
