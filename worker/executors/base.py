"""The executor interface under its historical import path: re-exports ``worker.engine_api``.

New code imports ``symfence.worker.engine_api``; this module exists so callers written against
``worker.executors.base`` keep working, and defines nothing of its own.
"""

from __future__ import annotations

from symfence.worker.engine_api import Candidate, CandidateOut, Executor, ExitKind, Outcome, Task

__all__ = ["Candidate", "CandidateOut", "Executor", "ExitKind", "Outcome", "Task"]
