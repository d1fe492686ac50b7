"""Benchmark: commits/s of 1, 2 and 4 coordinator processes sharing one campaign store.

Each process registers, then leases batches of work items and commits each one with a small
outcome (one coverage edge, one counter), as a coordinator of issue 29 would per result, until
the store has nothing left. The figure is items / WALL time from the first process's start to
the last one's exit (start-up, connection, registration and exit included), side by side for
every store in one run: SQLite with synchronous NORMAL (survives a process kill) and FULL
(survives a power loss), and PostgreSQL 15 with its defaults (fsync, synchronous_commit on;
a throw-away server from tests/pg_support.py, on a unix socket). The checker runs over every
row's history afterwards (not timed). This is the store's share of a commit only: no MPI, no
coordinator loop, no task.

    .venv/bin/python -m bench.bench_shared_store [--items 1500] [--procs 1,2,4] [--batch 8]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import save  # noqa: E402
from symfence.coordinator.shared import open_store  # noqa: E402
from symfence.coordinator.shared.checker import check  # noqa: E402
from symfence.coordinator.shared.postgres import PostgresStore  # noqa: E402
from symfence.coordinator.shared.records import ItemState, Outcome, WorkItem, coordinator_id  # noqa: E402
from symfence.coordinator.shared.sqlite import SqliteStore  # noqa: E402
from tests.pg_support import PgUnavailable, start_server  # noqa: E402


def _open(kind: str, where: str):
    if kind.startswith("sqlite"):
        return SqliteStore(where, synchronous=kind.split("-")[1].upper())
    return PostgresStore(where)


def _coordinator(kind: str, where: str, name: str, batch: int) -> None:
    store = _open(kind, where)
    me = coordinator_id(name)
    epoch = store.register(me).epoch
    while True:
        grant = store.lease(me, epoch, batch, 30.0)
        if not grant.leases:
            counts = store.counts()
            if counts[ItemState.PENDING] + counts[ItemState.LEASED] == 0:
                break
            time.sleep(0.005)
            continue
        for lease in grant.leases:
            index = int(lease.work_id[1:])
            result = store.commit(lease, Outcome(coverage=frozenset({index}), counters={"results": 1}))
            if not result.committed:
                raise SystemExit(f"{name}: commit refused ({result.reason}) in a run without faults")
    store.close()


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_row(kind: str, where: str, procs: int, items: int, batch: int) -> dict:
    setup = _open(kind, where)
    setup.add_work(WorkItem(f"w{i:06d}", b"x" * 64) for i in range(items))
    setup.close()
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_coordinator, args=(kind, where, f"c{n}", batch)) for n in range(procs)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - started
    if any(worker.exitcode != 0 for worker in workers):
        raise SystemExit(f"{kind} x{procs}: a coordinator process failed")
    store = _open(kind, where)
    report = check(store.history(), store.items())
    shares = sorted(row.committed for row in store.status())
    store.close()
    if not (report.ok and report.complete):
        raise SystemExit(f"{kind} x{procs}: the checker failed:\n" + "\n".join(report.lines()))
    return {"store": kind, "procs": procs, "items": items, "wall_s": round(wall, 3),
            "commits_per_s": round(items / wall), "per_process": shares, "checker": "ok"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1500)
    parser.add_argument("--procs", default="1,2,4")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--stores", default="sqlite-normal,sqlite-full,postgres")
    args = parser.parse_args()
    procs = [int(n) for n in args.procs.split(",")]
    kinds = args.stores.split(",")
    load_before = _uptime()
    server = None
    skipped = {}
    if "postgres" in kinds:
        try:
            server = start_server(durable=True)
        except PgUnavailable as exc:
            skipped["postgres"] = str(exc)
            kinds.remove("postgres")
            print(f"postgres: not measured: {exc}")
    rows: list[dict] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-shared-") as tmp:
            for n in procs:  # interleaved: every store at n processes, then n + 1 ...
                for kind in kinds:
                    if kind == "postgres":
                        assert server is not None
                        import psycopg

                        schema = f"b{n}"
                        with psycopg.connect(server.dsn, autocommit=True) as conn:
                            conn.execute(f"CREATE SCHEMA {schema}")
                        where = f"{server.dsn} options='-c search_path={schema}'"
                    else:
                        where = os.path.join(tmp, f"{kind}-{n}.sqlite")
                    row = run_row(kind, where, n, args.items, args.batch)
                    rows.append(row)
                    print(f"{kind:>14} x{n}: {row['commits_per_s']:>6} commits/s ({row['wall_s']} s) "
                          f"shares {row['per_process']}", flush=True)
    finally:
        if server is not None:
            server.stop()
    load_after = _uptime()
    one = {row["store"]: row["commits_per_s"] for row in rows if row["procs"] == 1}
    table_rows = [[row["store"], row["procs"], row["items"], row["wall_s"], row["commits_per_s"],
                   f"{row['commits_per_s'] / one[row['store']]:.2f}x" if row["store"] in one else "",
                   " / ".join(map(str, row["per_process"])), row["checker"]] for row in rows]
    text = save("shared_store", ["store", "processes", "items", "wall s", "commits/s", "vs 1 process",
                                 "commits per process", "checker"], table_rows,
                {"load_before": load_before, "load_after": load_after, "batch": args.batch,
                 "skipped": skipped, "rows_raw": rows})
    print(text)
    print(f"load before: {load_before}\nload after:  {load_after}")


if __name__ == "__main__":
    main()
