"""Concolic task options: names, defaults, validation and the time budget they imply.

Kept free of z3 so the executor's parent process (and the coordinator's config check) can
validate options and size its backstop without importing the engine. ``from_mapping`` ignores
unknown keys (options may carry other components' settings); ``check`` is the strict form the
config uses, so a typo is an error before anything runs. A known key with a bad value is an
``OptionError`` naming the key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

# Integer options that may be 0 (0 = none / no limit); every other int must be >= 1.
_ZERO_OK = frozenset({"max_candidates", "memory_limit_mb"})


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
    confirm_findings: bool = True  # replay crashes/hangs on the plain target in a fresh process

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
        return self.symbolic_timeout_s + self.solver_budget_s + executions + confirmations + 10.0
