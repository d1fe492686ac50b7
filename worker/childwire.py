"""The one message protocol between an executor and its engine's child process: typed msgpack frames.

Every engine child speaks it, whatever it runs. A frame is one msgpack array ``[kind, field,
...]`` with a fixed field list per kind (the dataclasses below, in field order), carried by
``multiprocessing.connection`` length-prefixed byte frames (``send_bytes``/``recv_bytes``; no
pickle anywhere). Decoding is strict, as on the MPI wire: an unknown kind, a wrong field count
or a field of the wrong type is a ``ChildProtocolError``, which the parent treats as a broken
child (killed, replaced, the task an ERROR), never as data.

parent -> child: ``RunTask`` (the task, the parent's ``sys.path``, and for batch engines the
inputs), ``Stop``.
child -> parent: ``Ready`` once, then per task ``Accepted``; while it runs ``Entered`` (a phase
starts: an execution of the input or a candidate, an engine run), ``InputTraced`` (the input
itself ran fine), ``Found`` (a candidate, replayed), ``SubGroup`` (the process group of a
helper the child started, 0 once it ended), ``Executed`` (one input of a batch), ``Counted``
(executions so far); finally ``Done`` with the ``Outcome``. The stream is what lets the parent
say what was running if the child dies or must be killed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import msgpack

from symfence.worker.engine_api import Candidate, ExitKind, Outcome, Phase, Task

MAX_FRAME_BYTES = 256 << 20  # a frame larger than this is a protocol error, not an allocation


class ChildProtocolError(Exception):
    """The peer sent a frame that is not a valid message of this protocol."""


# -- parent -> child -----------------------------------------------------------------------


@dataclass(frozen=True)
class RunTask:
    task: Task
    sys_path: tuple[str, ...] = ()  # appended to the child's own where missing
    inputs: tuple[bytes, ...] = ()  # batch engines (the tracer): the inputs to run, in order


@dataclass(frozen=True)
class Stop:
    pass


# -- child -> parent -----------------------------------------------------------------------


@dataclass(frozen=True)
class Ready:
    pid: int


@dataclass(frozen=True)
class Accepted:
    pass


@dataclass(frozen=True)
class Entered:
    phase: Phase
    data: bytes = b""  # the input being executed (INPUT / CANDIDATE)
    bound: int = 0
    since: float = 0.0  # time.monotonic() in the child when it started (one clock per host)
    index: int = -1  # batch engines: which input


@dataclass(frozen=True)
class InputTraced:
    trace: Mapping[int, int]


@dataclass(frozen=True)
class Found:
    candidate: Candidate


@dataclass(frozen=True)
class SubGroup:
    pgid: int


@dataclass(frozen=True)
class Executed:
    index: int
    kind: ExitKind
    trace: Mapping[int, int]
    detail: str = ""


@dataclass(frozen=True)
class Counted:
    execs: int


@dataclass(frozen=True)
class Done:
    outcome: Outcome


ToChild = RunTask | Stop
FromChild = Ready | Accepted | Entered | InputTraced | Found | SubGroup | Executed | Counted | Done
Message = ToChild | FromChild

_KINDS: dict[str, type[Any]] = {
    "run": RunTask, "stop": Stop, "ready": Ready, "accepted": Accepted, "entered": Entered,
    "input_traced": InputTraced, "found": Found, "subgroup": SubGroup, "executed": Executed,
    "counted": Counted, "done": Done,
}
_NAMES = {cls: name for name, cls in _KINDS.items()}


# -- encoding ------------------------------------------------------------------------------


_SCALARS = frozenset({int, float, str, bytes, bool, type(None)})


def _plain(value: Any) -> Any:
    if type(value) is dict and all(type(v) in _SCALARS for v in value.values()):
        return value  # a trace or counters: msgpack packs it as it is (10x faster than the walk below)
    if isinstance(value, (Task, Candidate, Outcome)):
        return [_plain(getattr(value, f.name)) for f in fields(value)]
    if isinstance(value, (ExitKind, Phase)):
        return value.value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def encode(message: Message) -> bytes:
    """One frame for ``message``."""
    name = _NAMES[type(message)]
    body = [_plain(getattr(message, f.name)) for f in fields(message)]
    frame: bytes = msgpack.packb([name, *body], use_bin_type=True)
    return frame


# -- decoding (strict) ---------------------------------------------------------------------

Check = Callable[[str, Any], Any]


def _fail(what: str, value: Any) -> ChildProtocolError:
    return ChildProtocolError(f"{what}: unexpected {type(value).__name__} {value!r:.80}")


def _int(what: str, v: Any) -> int:
    if type(v) is not int:
        raise _fail(what, v)
    return v


def _float(what: str, v: Any) -> float:
    if type(v) not in (int, float) or not math.isfinite(v):
        raise _fail(what, v)
    return float(v)


def _str(what: str, v: Any) -> str:
    if type(v) is not str:
        raise _fail(what, v)
    return v


def _bytes(what: str, v: Any) -> bytes:
    if type(v) is not bytes:
        raise _fail(what, v)
    return v


def _trace(what: str, v: Any) -> dict[int, int]:
    if type(v) is not dict or not all(type(k) is int and type(c) is int for k, c in v.items()):
        raise _fail(what, v)
    return v


def _counters(what: str, v: Any) -> dict[str, int]:
    if type(v) is not dict or not all(type(k) is str and type(c) is int for k, c in v.items()):
        raise _fail(what, v)
    return v


def _options(what: str, v: Any) -> dict[str, Any]:
    if type(v) is not dict or not all(type(k) is str for k in v):
        raise _fail(what, v)
    return v


def _optional(check: Check) -> Check:
    def inner(what: str, v: Any) -> Any:
        return None if v is None else check(what, v)
    return inner


def _list_of(check: Check) -> Check:
    def inner(what: str, v: Any) -> tuple[Any, ...]:
        if type(v) is not list:
            raise _fail(what, v)
        return tuple(check(f"{what}[{i}]", x) for i, x in enumerate(v))
    return inner


def _enum(cls: type[ExitKind] | type[Phase]) -> Check:
    by_value = {m.value: m for m in cls}

    def inner(what: str, v: Any) -> Any:
        if type(v) is not str or v not in by_value:
            raise _fail(what, v)
        return by_value[v]
    return inner


def _record(cls: type[Any], checks: tuple[Check, ...]) -> Check:
    names = [f.name for f in fields(cls)]

    def inner(what: str, v: Any) -> Any:
        if type(v) is not list or len(v) != len(checks):
            raise _fail(f"{what} ({cls.__name__})", v)
        return cls(*(check(f"{what}.{n}", x) for check, n, x in zip(checks, names, v, strict=True)))
    return inner


_exit_kind = _enum(ExitKind)
_task = _record(Task, (_str, _str, _bytes, _str, _int, _options, _int))
_candidate = _record(Candidate, (_bytes, _trace, _exit_kind, _int, _str))
_outcome = _record(Outcome, (_exit_kind, _trace, _list_of(_candidate), _float, _float, _float, _int,
                             _str, _counters, _list_of(_bytes), _optional(_int)))

_SCHEMA: dict[type[Any], tuple[Check, ...]] = {
    RunTask: (_task, _list_of(_str), _list_of(_bytes)),
    Stop: (),
    Ready: (_int,),
    Accepted: (),
    Entered: (_enum(Phase), _bytes, _int, _float, _int),
    InputTraced: (_trace,),
    Found: (_candidate,),
    SubGroup: (_int,),
    Executed: (_int, _exit_kind, _trace, _str),
    Counted: (_int,),
    Done: (_outcome,),
}
assert set(_SCHEMA) == set(_KINDS.values())


def decode(frame: bytes) -> Message:
    """The message in ``frame``; ``ChildProtocolError`` if it is not exactly one valid message."""
    if len(frame) > MAX_FRAME_BYTES:
        raise ChildProtocolError(f"frame of {len(frame)} bytes is over {MAX_FRAME_BYTES}")
    try:
        items = msgpack.unpackb(frame, raw=False, strict_map_key=False, use_list=True)
    except Exception as exc:  # noqa: BLE001 - any undecodable frame is the peer's fault
        raise ChildProtocolError(f"undecodable frame: {exc}") from None
    if type(items) is not list or not items or type(items[0]) is not str or items[0] not in _KINDS:
        raise _fail("message kind", items)
    cls = _KINDS[items[0]]
    check = _record(cls, _SCHEMA[cls])
    message: Message = check(items[0], items[1:])
    return message
