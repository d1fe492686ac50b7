"""Executor option schemas: names, defaults, validation and the budgets they imply, for both sides.

The coordinator checks a config against these before anything is launched (a typo is one line
naming the key), and the worker's executors parse each task's options with the same classes, so
a rule has one home. Pure data: no engine, z3 or TritonDSE import.

- ``EngineOptions``: the concolic engine (``[concolic]``). ``from_mapping`` ignores unknown keys
  (options may carry other components' settings); ``check`` is the strict form the config uses.
  A known key with a bad value is an ``OptionError`` naming the key.
- ``NativeOptions``: the native engine and oracle (``[native]``), strict.
- ``FuzzOptions``: one Atheris fuzz slice.
- ``NativeFuzzOptions``: one native mutation slice through the AFL++ forkserver, strict.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

# Integer options that may be 0 (0 = none / no limit); every other int must be >= 1.
_ZERO_OK = frozenset({"max_candidates", "memory_limit_mb", "loop_extensions"})


class OptionError(ValueError):
    """One option is unknown or has a bad value; ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"option {key} {message}")
        self.key = key
        self.reason = message


@dataclass(frozen=True)
class EngineOptions:
    """Per-task settings of the concolic engine (``Task.options`` keys of the same names)."""

    exec_timeout_s: float = 1.0  # one concrete execution of the target
    solver_timeout_ms: int = 200  # one solver query
    max_branches: int = 2000  # branches recorded per run (later ones count as cap hits)
    max_candidates: int = 64  # children generated per task
    symbolic_timeout_s: float = 10.0  # the one symbolic run (its partial path is still used)
    solver_budget_s: float = 10.0  # total solver time per task
    max_input_len: int = 4096  # longest child the solver may ask for
    pin_concretised: bool = False  # record concretisations as path constraints
    memory_limit_mb: int = 2048  # address-space limit of the process running the target; 0 = none
    instrument: str = ""  # comma-separated modules rewritten besides the target's package
    instrument_imports: bool = True  # also rewrite the library a harness imports (harness_imports)
    confirm_findings: bool = True  # replay crashes/hangs on the plain target in a fresh process
    loop_extensions: int = 16  # extra symbolic runs per task following a loop that must run longer

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> EngineOptions:
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in options:
                continue
            value = options[f.name]
            if f.type == "str":
                if type(value) is not str:
                    raise OptionError(f.name, f"must be a string, not {value!r}")
            elif f.type == "bool":
                if type(value) is not bool:
                    raise OptionError(f.name, f"must be true or false, not {value!r}")
            elif f.type == "int":
                low = 0 if f.name in _ZERO_OK else 1
                if type(value) is not int or value < low:
                    raise OptionError(f.name, f"must be an integer >= {low}, not {value!r}")
            elif type(value) not in (int, float) or not value > 0 or value == float("inf"):
                raise OptionError(f.name, f"must be a positive number, not {value!r}")
            values[f.name] = value
        return cls(**values)

    @classmethod
    def check(cls, options: Mapping[str, Any]) -> EngineOptions:
        """Like ``from_mapping``, but an unknown key is an error too."""
        known = {f.name for f in dataclasses.fields(cls)}
        for key in options:
            if key not in known:
                raise OptionError(key, f"is unknown (known: {', '.join(sorted(known))})")
        return cls.from_mapping(options)

    def task_budget_s(self) -> float:
        """Generous upper bound on one task's duration, for the parent's backstop."""
        executions = (self.max_candidates + 1) * self.exec_timeout_s
        # each confirmation is a fresh interpreter (about 1 s on a loaded machine) + one run
        confirmations = ((self.max_candidates + 1) * (self.exec_timeout_s + 5.0)
                         if self.confirm_findings else 0.0)
        extensions = self.symbolic_timeout_s if self.loop_extensions else 0.0  # all of them together
        return (self.symbolic_timeout_s + extensions + self.solver_budget_s + executions
                + confirmations + 10.0)


ENGINES = ("tritondse", "symcc")
ORACLES = ("engine", "forkserver", "showmap")
SOLVERS = ("bitwuzla", "z3")
INPUT_MODES = ("stdin", "file")


# An emulated replay (the `engine` oracle's run of a candidate) may take this many times
# `exec_timeout_s`: emulation is that much slower than the program (worker/native/tritondse_engine.py).
REPLAY_FACTOR = 10


@dataclass(frozen=True)
class NativeOptions:
    """Per-task options (``[native]`` in the config); every field is a scalar for the wire."""

    engine: str = "tritondse"
    oracle: str = "engine"
    afl_target: str = "{target}.afl"  # the afl-cc build of the target (forkserver / showmap)
    symcc_command: str = "{target}.symcc"  # the SymCC build (or any contract-following command)
    input: str = "stdin"  # how the target reads its input: stdin, or a file named by @@
    exec_timeout_s: float = 1.0  # one native execution (oracle run; a hang past it)
    engine_timeout_s: float = 30.0  # one engine run (emulation, at most half of it, + solving)
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


@dataclass(frozen=True)
class FuzzOptions:
    slice_s: float = 10.0
    exec_timeout_s: float = 1.0
    max_len: int = 4096  # 0 = libFuzzer's gradual length control (restarts with every slice)
    max_candidates: int = 1000
    rss_limit_mb: int = 2048  # libFuzzer's -rss_limit_mb (0 = none)
    library_dict: bool = True  # the constants of the code under test as libFuzzer -dict (worker/fuzz/libdict.py)

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> FuzzOptions:
        values: dict[str, Any] = {}
        for name, default in ((f, getattr(cls, f)) for f in cls.__dataclass_fields__):
            if name not in options:
                continue
            v = options[name]
            low = 0 if name in ("max_len", "rss_limit_mb") else 1
            if type(default) is bool and type(v) is not bool:
                raise ValueError(f"option {name} must be true or false, not {v!r}")
            if type(default) is int and (type(v) is not int or v < low):
                raise ValueError(f"option {name} must be a positive int, not {v!r}")
            if type(default) is float and (type(v) not in (int, float) or not v > 0):
                raise ValueError(f"option {name} must be a positive number, not {v!r}")
            values[name] = type(default)(v)
        return cls(**values)


@dataclass(frozen=True)
class NativeFuzzOptions:
    """One native mutation slice (``worker/executors/native_fuzz.py``): ``fuzz.slice_s``,
    ``fuzz.max_len``, ``fuzz.max_candidates`` and the oracle's keys of ``[native.options]``."""

    slice_s: float = 10.0  # mutation time (the calibration of new corpus entries included)
    max_len: int = 4096  # longest input a mutation may make (0 = 4096)
    max_candidates: int = 1000  # kept inputs returned per slice (crashes and hangs besides)
    max_execs: int = 0  # stop after this many executions (0 = only the clock; tests)
    afl_target: str = "{target}.afl"
    input: str = "stdin"
    exec_timeout_s: float = 1.0
    target_mem_limit_mb: int = 0

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> NativeFuzzOptions:
        known: dict[str, Any] = {f.name: f.default for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in options.items():
            if key not in known:
                raise ValueError(f"native fuzz option {key}: unknown")
            default = known[key]
            if type(value) is bool or (type(value) is not type(default)
                                       and not (type(default) is float and type(value) is int)):
                raise ValueError(f"native fuzz option {key}: must be a {type(default).__name__}, "
                                 f"got {value!r}")
            if isinstance(value, (int, float)) and value < 0:
                raise ValueError(f"native fuzz option {key}: must be >= 0, got {value!r}")
            values[key] = float(value) if type(default) is float else value
        opts = cls(**values)
        if opts.input not in INPUT_MODES:
            raise ValueError(f"native fuzz option input: must be one of {', '.join(INPUT_MODES)}")
        if opts.slice_s <= 0 or opts.exec_timeout_s <= 0:
            raise ValueError("native fuzz option slice_s/exec_timeout_s: must be > 0")
        return opts

    @classmethod
    def for_campaign(cls, fuzz: Mapping[str, Any], native: Mapping[str, Any]) -> dict[str, Any]:
        """A campaign's slice options (a wire map) from its ``[fuzz]`` values and ``native.options``."""
        nat = NativeOptions.from_mapping(native)
        return {"slice_s": float(fuzz["slice_s"]), "max_len": int(fuzz["max_len"]),
                "max_candidates": int(fuzz["max_candidates"]), "afl_target": nat.afl_target,
                "input": nat.input, "exec_timeout_s": nat.exec_timeout_s,
                "target_mem_limit_mb": nat.target_mem_limit_mb}

    def afl_path(self, target: str) -> str:
        return self.afl_target.format(target=target)
