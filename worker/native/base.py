"""The native executor's two parts: an *engine* (input in, candidates out) and an *oracle* (input
in, exit status and AFL edge hit counts out), their plain-data results and their options."""

from __future__ import annotations

import enum
import shlex
import sys
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Protocol


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


ENGINES = ("tritondse", "symcc")
ORACLES = ("engine", "forkserver", "showmap")
SOLVERS = ("bitwuzla", "z3")
INPUT_MODES = ("stdin", "file")


@dataclass(frozen=True)
class NativeOptions:
    """Per-task options (``[native]`` in the config); every field is a scalar for the wire."""

    engine: str = "tritondse"
    oracle: str = "engine"
    afl_target: str = "{target}.afl"  # the afl-cc build of the target (forkserver / showmap)
    symcc_command: str = "{target}.symcc"  # the SymCC build (or any contract-following command)
    input: str = "stdin"  # how the target reads its input: stdin, or a file named by @@
    exec_timeout_s: float = 1.0  # one execution (oracle run, emulated replay)
    engine_timeout_s: float = 30.0  # one engine run (symbolic execution + solving)
    mem_limit_mb: int = 2048  # address-space limit of the engine child process
    target_mem_limit_mb: int = 0  # address-space limit of the real target (0 = none)
    solver: str = "bitwuzla"
    solver_timeout_ms: int = 2000
    max_candidates: int = 64
    max_branches: int = 2000  # branches considered for negation per run

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> NativeOptions:
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in options.items():
            if key not in known:
                raise ValueError(f"native.{key}: unknown option")
            default = known[key].default
            if isinstance(default, bool) or type(value) is bool:
                raise ValueError(f"native.{key}: must be a {type(default).__name__}, got {value!r}")
            if isinstance(default, float) and type(value) in (int, float):
                value = float(value)
            if type(value) is not type(default):
                raise ValueError(f"native.{key}: must be a {type(default).__name__}, got {value!r}")
            if isinstance(value, (int, float)) and value < 0:
                raise ValueError(f"native.{key}: must be >= 0, got {value!r}")
            values[key] = value
        opts = cls(**values)
        for key, allowed in (("engine", ENGINES), ("oracle", ORACLES), ("solver", SOLVERS),
                             ("input", INPUT_MODES)):
            if getattr(opts, key) not in allowed:
                raise ValueError(f"native.{key}: must be one of {', '.join(allowed)}, "
                                 f"got {getattr(opts, key)!r}")
        if opts.engine == "symcc" and opts.oracle == "engine":
            raise ValueError("native.oracle: the symcc engine has no trace of its own; "
                             "use forkserver or showmap (an afl-cc build)")
        if opts.exec_timeout_s <= 0 or opts.engine_timeout_s <= 0:
            raise ValueError("native.exec_timeout_s: time-outs must be > 0")
        return opts

    def afl_path(self, target: str) -> str:
        return self.afl_target.format(target=target)

    def symcc_argv(self, target: str) -> list[str]:
        return [a.format(target=target, python=sys.executable) for a in shlex.split(self.symcc_command)]

    def task_budget_s(self, candidates: int) -> float:
        """Parent-side budget for a whole task: one engine run plus one oracle run per candidate."""
        return self.engine_timeout_s + (candidates + 2) * (self.exec_timeout_s + 0.5) + 5.0


SIGNAL_NAMES = {4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
                11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM", 24: "SIGXCPU", 31: "SIGSYS"}


def signal_name(sig: int) -> str:
    return SIGNAL_NAMES.get(sig, f"SIG{sig}")


def fold(index: int) -> int:
    """AFL maps larger than 64 KiB are folded into the campaign's 64 KiB map."""
    return index & 0xFFFF
