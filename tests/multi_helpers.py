"""Several coordinators' mpiexec jobs side by side (issue 29): tests and bench/bench_multi.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.mpi_helpers import MPIEXEC, ROOT, logged, toml_dump


class Job:
    """One coordinator's mpiexec job (1 coordinator + 2 workers), in a process group of its own."""

    def __init__(self, tmp_path: Path, name: str, cfg: dict[str, dict[str, Any]], store: str | None,
                 ranks: int = 3) -> None:
        self.out = tmp_path / name
        config = tmp_path / f"{name}.toml"
        config.write_text(toml_dump(cfg))
        cmd = [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "symfence.coordinator",
               "--config", str(config), "--out", str(self.out), "--no-status",
               *(["--store", store] if store else [])]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.stdout = self.stderr = ""
        self.launched, self.exited = time.time(), 0.0

    def pid(self) -> int | None:
        """Rank 0's process id, once it started its campaign."""
        started = logged(self.out, "campaign.started")
        return int(started[0]["pid"]) if started else None

    def wait(self, deadline: float) -> int:
        try:
            self.stdout, self.stderr = self.proc.communicate(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            self.kill()
            self.stdout, self.stderr = self.proc.communicate()
            raise AssertionError(f"job {self.out.name} hung\n{self.explain()}") from None
        self.exited = self.exited or time.time()
        return self.proc.returncode

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def explain(self) -> str:
        return f"{self.out.name}: exit {self.proc.returncode}\nstdout:\n{self.stdout[-2500:]}\nstderr:\n" \
               f"{self.stderr[-2500:]}"


def run_all(jobs: list[Job], timeout_s: float) -> list[int]:
    """Wait for every job (a hung one fails the test; all are killed then)."""
    deadline = time.monotonic() + timeout_s
    try:
        return [job.wait(deadline) for job in jobs]
    finally:
        for job in jobs:
            job.kill()


def wait_for(what: Callable[[], Any], timeout_s: float, jobs: list[Job]) -> Any:
    """Poll `what()` until it is truthy; fail (and kill every job) after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            got = what()
        except (OSError, ValueError, KeyError):
            got = None
        if got:
            return got
        if any(job.proc.poll() is not None for job in jobs):
            break
        time.sleep(0.05)
    for job in jobs:
        job.kill()
    raise AssertionError("timed out waiting\n" + "\n".join(job.explain() for job in jobs))
