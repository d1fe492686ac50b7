"""Several coordinators across network-namespace hosts (issue 29): PostgreSQL on h1, one
coordinator's mpiexec job (1 coordinator + 2 workers) on h2 and one on h3, all joined to the
store over TCP. h3's link is cut while its coordinator holds leases, for longer than a lease:
the h2 coordinator takes its items over; when the link comes back, whatever the h3 coordinator
commits late is refused (or it stops on its lost store connection); the checker passes and every
item is committed exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.netns import Cluster
from symfence.coordinator.shared import open_store
from symfence.coordinator.shared.checker import check
from symfence.coordinator.shared.records import EventKind, ItemState
from tests.mpi_helpers import MPIEXEC, ROOT, read_stat, synthetic_cfg, toml_dump
from tests.pg_support import pg_on_namespace_hosts

pytestmark = [pytest.mark.mpi, pytest.mark.heavy]

ITEMS, LEASE_S, CUT_S = 300, 2.0, 4.0


def _job(cluster: Cluster, host: str, tmp_path: Path, store: str) -> subprocess.Popen:
    cfg = synthetic_cfg(campaign={"duration_s": 40, "store": store},
                        synthetic={"seeds": ITEMS, "task_ms": 40.0},
                        store={"lease_s": LEASE_S, "coordinator": host})
    config = tmp_path / f"{host}.toml"
    config.write_text(toml_dump(cfg))
    argv = [MPIEXEC, "-n", "3", sys.executable, "-m", "symfence.coordinator", "--config", str(config),
            "--out", str(tmp_path / host), "--no-status"]
    return subprocess.Popen(cluster.on(host, argv), cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_a_cut_off_coordinators_items_move_and_its_late_commits_are_refused(tmp_path: Path) -> None:
    with pg_on_namespace_hosts(3) as (cluster, server):
        store = f"postgresql://postgres@{server.listen}:{server.port}/postgres?connect_timeout=5"
        jobs: dict[str, subprocess.Popen] = {}
        monitor = None
        try:
            jobs = {host: _job(cluster, host, tmp_path, store) for host in ("h2", "h3")}
            deadline = time.monotonic() + 40
            while not all(read_stat(tmp_path / host, "committed") >= 10 for host in jobs):
                assert time.monotonic() < deadline and all(p.poll() is None for p in jobs.values()), \
                    {h: p.poll() for h, p in jobs.items()}
                time.sleep(0.1)
            monitor = open_store(server.dsn)
            assert any(row.state is ItemState.LEASED and row.coordinator == "h3" for row in monitor.items())
            cluster.cut("h3")
            cut_at = time.time()
            time.sleep(CUT_S)
            cluster.mend("h3")
            outs = {}
            for host, proc in jobs.items():
                try:
                    outs[host] = proc.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    outs[host] = proc.communicate()
                    raise AssertionError(f"{host} hung:\n{outs[host][1][-3000:]}") from None
            assert jobs["h2"].returncode == 0, outs["h2"][1][-3000:]
            history, rows = monitor.history(), monitor.items()
            report = check(history, rows)
            assert report.ok, "\n".join(report.lines())
            assert report.complete and report.done == ITEMS, "\n".join(report.lines())
            taken = [e for e in history if e.kind is EventKind.EXPIRE and e.coordinator == "h3"]
            assert taken and min(e.at for e in taken) - cut_at <= LEASE_S + 5.0 + 1.0
            # Nothing of h3's after its leases ended: each of its commits was under a current lease
            # (the checker), and what it applied locally is exactly what the store committed for it.
            status = {row.coordinator: row for row in monitor.status()}
            assert read_stat(tmp_path / "h3", "committed") == status["h3"].committed, outs["h3"][1][-3000:]
            assert read_stat(tmp_path / "h2", "committed") + status["h3"].committed == ITEMS
            refused_here = read_stat(tmp_path / "h3", "quarantined_stale_lease")
            if jobs["h3"].returncode == 0:  # it came back: its late commits were refused and counted
                assert refused_here > 0 and refused_here == status["h3"].refused, outs["h3"][1][-3000:]
            else:  # or its store session ended meanwhile: it stopped, saying why
                assert jobs["h3"].returncode == 3 and "campaign store" in outs["h3"][1], outs["h3"][1][-3000:]
        finally:
            if monitor is not None:
                monitor.close()
            for proc in jobs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(5)
