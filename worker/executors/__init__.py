"""Executors by name: what a WORK's `executor` field selects on the worker."""

from __future__ import annotations

from symfence.worker.executors.base import Executor


def make_executor(name: str) -> Executor:
    if name == "synthetic":
        from symfence.worker.executors.synthetic import SyntheticExecutor

        return SyntheticExecutor()
    if name == "concolic":
        from symfence.worker.executors.concolic import ConcolicExecutor

        return ConcolicExecutor()
    raise ValueError(f"unknown executor {name!r}")
