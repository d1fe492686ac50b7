"""Executors by name: what a WORK's `executor` field selects on the worker."""

from __future__ import annotations

from symfence.worker.executors.base import Executor


def make_executor(name: str) -> Executor:
    if name == "synthetic":
        from symfence.worker.executors.synthetic import SyntheticExecutor

        return SyntheticExecutor()
    if name == "concolic":
        from symfence.worker.executors.concolic import ConcolicExecutor
        from symfence.worker.executors.traced import TracedExecutor

        return TracedExecutor(ConcolicExecutor(), trace_input=True, keep_inner=True)
    if name == "fuzz":
        from symfence.worker.executors.fuzz import FuzzExecutor
        from symfence.worker.executors.traced import TracedExecutor

        return TracedExecutor(FuzzExecutor(), trace_input=False)
    if name == "native":
        from symfence.worker.executors.native import NativeExecutor

        return NativeExecutor()
    if name == "minimize":
        from symfence.worker.executors.minimize import MinimizeExecutor

        return MinimizeExecutor()
    raise ValueError(f"unknown executor {name!r}")
