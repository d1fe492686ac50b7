"""The PostgreSQL store across hosts: the server on one network-namespace host (bench/netns.py),
a coordinator process on each of two others. One coordinator's link is cut while it holds
leases: the other takes its items over after their expiry and ends the campaign; when the link
comes back, nothing the cut-off one sends is applied late, and the checker passes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from bench.netns import Cluster
from symfence.coordinator.shared import open_store
from symfence.coordinator.shared.checker import check
from symfence.coordinator.shared.records import EventKind, ItemState, WorkItem
from tests.mpi_helpers import ROOT
from tests.pg_support import pg_on_namespace_hosts
from tests.test_shared_store_race import ITEMS, TTL_S

IDLE_IN_TRANSACTION_S = 5.0  # PostgresStore's default: a session cut mid-transaction ends then


def _coordinator(cluster: Cluster, host: str, dsn: str, name: str, results: str) -> subprocess.Popen:
    code = ("from tests.test_shared_store_race import coordinator; "
            f"coordinator({dsn!r}, {name!r}, {results!r}, True, False)")
    return subprocess.Popen(cluster.on(host, [sys.executable, "-c", code]), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _stderr(proc: subprocess.Popen) -> str:
    return proc.stderr.read() if proc.stderr else ""


pytestmark = pytest.mark.heavy  # timing of leases: never beside a fuzzing campaign


def test_a_coordinator_cut_off_loses_its_items_and_nothing_it_sends_late_is_applied(tmp_path) -> None:
    with pg_on_namespace_hosts(3) as (cluster, server):
        monitor = None
        procs: dict[str, subprocess.Popen] = {}
        try:
            setup = open_store(server.dsn)  # the test itself talks over the unix socket
            setup.add_work([WorkItem(f"w{i:03d}", b"x") for i in range(ITEMS)])
            setup.close()
            procs = {name: _coordinator(cluster, host, server.tcp_dsn, name, str(tmp_path / f"{name}.json"))
                     for name, host in (("near", "h2"), ("far", "h3"))}
            monitor = open_store(server.dsn)
            deadline = time.monotonic() + 20
            while not any(row.state is ItemState.LEASED and row.coordinator == "far"
                          for row in monitor.items()):
                assert time.monotonic() < deadline, "the far coordinator never held a lease"
                assert procs["far"].poll() is None, _stderr(procs["far"])
                time.sleep(0.005)
            cluster.cut("h3")
            cut_at = time.time()
            assert procs["near"].wait(timeout=30) == 0, _stderr(procs["near"])
            cluster.mend("h3")
            try:  # back on the network, it tries its late commits (or learns its session ended)
                procs["far"].wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

            history, rows = monitor.history(), monitor.items()
            report = check(history, rows)
            assert report.ok, "\n".join(report.lines())
            assert report.complete and report.done == ITEMS
            assert monitor.counters() == {"commits": ITEMS}
            late_commits = [e for e in history if e.kind is EventKind.COMMIT and e.coordinator == "far"
                            and e.at > cut_at + 0.05]
            assert late_commits == []  # nothing of the far one applied after the cut
            expired = [e for e in history if e.kind is EventKind.EXPIRE and e.coordinator == "far"]
            assert expired, "the cut-off coordinator's leases were never taken over"
            for event in expired:  # after the expiry, or once the server ended its transaction
                assert 0 <= event.at - (event.expires or 0) <= IDLE_IN_TRANSACTION_S + 1.0
            assert min(event.at for event in expired) - cut_at <= TTL_S + IDLE_IN_TRANSACTION_S + 1.0
            results = tmp_path / "far.json"
            far = json.loads(results.read_text()) if results.exists() else None
            refused = [e for e in history if e.kind is EventKind.REFUSE and e.coordinator == "far"]
            if far is not None:  # it ran to its end: its refusals are the store's
                assert sum(far["refused"].values()) == len(refused)
        finally:
            if monitor is not None:
                monitor.close()
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(5)
