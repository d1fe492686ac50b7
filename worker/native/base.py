"""The native executor's two parts: an *engine* (input in, candidates out) and an *oracle* (input
in, exit status and AFL edge hit counts out) and their plain-data results. Their options
(``NativeOptions``) live in ``protocol.options`` and are re-exported here."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping, Protocol

from symfence.protocol.options import (  # noqa: F401 - re-exported: the schema lives in protocol
    ENGINES, INPUT_MODES, ORACLES, SOLVERS, NativeOptions)


OOM_MARK = "MemoryError"  # the exception type the coordinator classes as an out-of-memory finding

from symfence.protocol.coverage import MAP_SIZE


class NativeError(Exception):
    """The target cannot be run this way (static binary, unmodelled import, missing build, ...).
    Always a task ERROR with this message, never a finding."""


class RunKind(str, enum.Enum):
    """How one native execution ended."""

    OK = "ok"
    CRASH = "crash"  # killed by a signal (or a modelled fault in the emulator)
    HANG = "hang"  # over the execution time-out
    OOM = "oom"  # over the memory limit


@dataclass(frozen=True)
class RunResult:
    """One execution of a native target, from an oracle or the engine's own trace."""

    kind: RunKind
    trace: Mapping[int, int]  # AFL edge index (folded into 0..65535) -> raw hit count
    exit_code: int = 0
    signal: int = 0
    detail: str = ""  # for a finding: last line "SIGNAME: what", optional 'File "..."' line


@dataclass(frozen=True)
class GeneratedInput:
    """A candidate from an engine; bound is None when the engine has no generational bound."""

    data: bytes
    bound: int | None = None


@dataclass(frozen=True)
class EngineRun:
    """What one engine run on one input produced."""

    candidates: tuple[GeneratedInput, ...]
    own: RunResult | None = None  # the engine's view of the input's own execution, if it has one
    solver_s: float = 0.0
    execs: int = 1
    stats: Mapping[str, int] = field(default_factory=dict)


class Engine(Protocol):
    """Generates new inputs from one input (and its generational bound)."""

    def explore(self, data: bytes, bound: int) -> EngineRun: ...

    def close(self) -> None: ...


class Oracle(Protocol):
    """Runs one input concretely: status and AFL hit counts."""

    map_size: int

    def run(self, data: bytes) -> RunResult: ...

    def close(self) -> None: ...


SIGNAL_NAMES = {4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
                11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM", 24: "SIGXCPU", 31: "SIGSYS"}


def signal_name(sig: int) -> str:
    return SIGNAL_NAMES.get(sig, f"SIG{sig}")


def fold(index: int) -> int:
    """AFL maps larger than 64 KiB are folded into the campaign's 64 KiB map."""
    return index & (MAP_SIZE - 1)
