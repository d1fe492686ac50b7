"""Concolic task options: names, defaults, validation and the time budget they imply.

Kept free of z3 so the executor's parent process can validate options and size its backstop
without importing the engine. Unknown keys are ignored (options may carry other components'
settings); a known key with a bad value is a ``ValueError``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping


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

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> EngineOptions:
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in options:
                continue
            value = options[f.name]
            if f.type == "bool":
                if type(value) is not bool:
                    raise ValueError(f"option {f.name} must be a bool, not {value!r}")
            elif f.type == "int":
                if type(value) is not int or value < (0 if f.name == "max_candidates" else 1):
                    raise ValueError(f"option {f.name} must be a positive int, not {value!r}")
            elif type(value) not in (int, float) or not value > 0 or value == float("inf"):
                raise ValueError(f"option {f.name} must be a positive number, not {value!r}")
            values[f.name] = value
        return cls(**values)

    def task_budget_s(self) -> float:
        """Generous upper bound on one task's duration, for the parent's backstop."""
        executions = (self.max_candidates + 1) * self.exec_timeout_s
        return self.symbolic_timeout_s + self.solver_budget_s + executions + 10.0
