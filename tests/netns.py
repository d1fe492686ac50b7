"""Runs real campaigns across network-namespace hosts (bench/netns.py) from tests, with a hard timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from bench.netns import Cluster, why_not
from tests.mpi_helpers import MPIEXEC, OMPI_MPIEXEC, OMPI_PYTHON, ROOT, Run, toml_dump

# The namespaces share one kernel: without this the ranks of different "hosts" may talk through
# shared memory (UCX's posix transport) and nothing crosses the links. TCP only, on eth0.
MPICH_TCP = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0"}
OMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def cluster_fixture(
    n: int = 3, delays: dict[str, float] | None = None, binds: dict[str, list[tuple[str, str]]] | None = None
) -> Iterator[Cluster]:
    """A Cluster for one test, or a skip that prints why hosts cannot be made here."""
    reason = why_not()
    if reason:
        pytest.skip(f"no namespace hosts: {reason}")
    with Cluster(n, delays=delays, binds=binds) as c:
        yield c


def run_hosts(
    cluster: Cluster,
    tmp_path: Path,
    cfg: dict[str, dict[str, Any]],
    slots: dict[str, int],
    *,
    timeout_s: float = 60,
    out: Path | None = None,
    extra_args: list[str] | None = None,
    ompi: bool = False,
    env: dict[str, str] | None = None,
    on_start: Callable[[subprocess.Popen], None] | None = None,
) -> Run:
    """One campaign with rank 0 on the first host of `slots` and the workers spread as given."""
    out = out or tmp_path / "out"
    config = tmp_path / "campaign.toml"
    config.write_text(toml_dump(cfg))
    python = OMPI_PYTHON if ompi else sys.executable
    argv = [
        python,
        "-m",
        "symfence.coordinator",
        "--config",
        str(config),
        "--out",
        str(out),
        "--no-status",
        *(extra_args or []),
    ]
    if ompi:
        cmd = cluster.ompi_mpiexec(OMPI_MPIEXEC, slots, ["--with-ft", "ulfm", *argv])
        extra = {**OMPI_ENV, "PATH": f"{Path(OMPI_MPIEXEC).parent}:{os.environ['PATH']}"}
    else:
        cmd = cluster.mpiexec(MPIEXEC, slots, argv)
        extra = dict(MPICH_TCP)
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **extra, **(env or {})},
    )
    if on_start is not None:
        on_start(proc)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        for h in cluster.hosts:
            cluster.kill(h.name)
        stdout, stderr = proc.communicate()
        raise AssertionError(
            f"campaign hung (> {timeout_s} s)\nstdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}"
        )
    return Run(proc.returncode, stdout, stderr, out)


def wait_gone(cluster: Cluster, host: str, timeout_s: float) -> list[int]:
    """Poll until nothing runs on `host` (returns []) or the time is up (returns what still runs)."""
    until = time.monotonic() + timeout_s
    while True:
        left = cluster.pids(host)
        if not left or time.monotonic() > until:
            return left
        time.sleep(0.1)


def hosts_of(run: Run) -> dict[int, str]:
    """Each worker rank's host, from the coordinator's `worker.ready` events."""
    return {e["worker"]: e["host"] for e in run.events() if e["event"] == "worker.ready"}
