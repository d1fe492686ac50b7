"""Benchmark: commits/s of 1, 2 and 4 coordinator processes sharing one campaign store.

Each process registers, then leases batches of work items and commits them with a small outcome
each (one coverage edge, one counter), until the store has nothing left: one transaction per
commit ("one by one", a lease of 1 at a time), or a lease of `--batch` items committed in one
transaction (`commit_batch`, "group", as the journal's group commit does). The figure is items /
WALL time from the first process's start to
the last one's exit (start-up, connection, registration and exit included), side by side for
every store in one run: SQLite with synchronous NORMAL (a commit survives a process kill) and
FULL (a power loss), PostgreSQL 15 with synchronous_commit off (a client kill; a server crash
may lose the last commits) and with its defaults (a power loss); a throw-away server from
tests/pg_support.py with fsync on, on a unix socket of this host. The checker runs over every
row's history afterwards (not timed). "client CPU" is the coordinator processes' own CPU time
(user + system, start-up included) per commit: what the store adds to a coordinator's cost per
result. This is the store's share of a commit only: no MPI, no coordinator loop, no task.

    .venv/bin/python -m bench.bench_shared_store [--items 600] [--group-items 4000] [--procs 1,2,4]
        [--batch 32] [--stores sqlite-normal,sqlite-full,postgres-async,postgres]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import save  # noqa: E402
from symfence.coordinator.shared.checker import check  # noqa: E402
from symfence.coordinator.shared.postgres import PostgresStore  # noqa: E402
from symfence.coordinator.shared.records import ItemState, Outcome, WorkItem, coordinator_id  # noqa: E402
from symfence.coordinator.shared.sqlite import SqliteStore  # noqa: E402
from tests.pg_support import PgUnavailable, start_server  # noqa: E402

STORES = {  # name: (how to open it, what a commit survives)
    "sqlite-normal": (lambda where: SqliteStore(where, synchronous="NORMAL"), "a process kill"),
    "sqlite-full": (lambda where: SqliteStore(where, synchronous="FULL"), "a power loss"),
    "postgres-async": (lambda where: PostgresStore(where, synchronous_commit=False), "a client kill"),
    "postgres": (lambda where: PostgresStore(where), "a power loss"),
}


def _open(kind: str, where: str):
    return STORES[kind][0](where)


def _coordinator(kind: str, where: str, name: str, batch: int, group: bool, cpu_file: str) -> None:
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
        commits = [(lease, Outcome(coverage=frozenset({int(lease.work_id[1:])}), counters={"results": 1}))
                   for lease in grant.leases]
        if group:
            results = store.commit_batch(commits)
        else:
            results = tuple(store.commit(lease, outcome) for lease, outcome in commits)
        refused = [result.reason for result in results if not result.committed]
        if refused:
            raise SystemExit(f"{name}: commits refused ({refused}) in a run without faults")
    store.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    Path(cpu_file).write_text(str(usage.ru_utime + usage.ru_stime))


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_row(kind: str, where: str, procs: int, items: int, batch: int, group: bool) -> dict:
    setup = _open(kind, where)
    setup.add_work(WorkItem(f"w{i:06d}", b"x" * 64) for i in range(items))
    setup.close()
    ctx = multiprocessing.get_context("fork")
    cpu_files = [os.path.join(tempfile.gettempdir(), f"bench-shared-{os.getpid()}-{n}.cpu")
                 for n in range(procs)]
    workers = [ctx.Process(target=_coordinator, args=(kind, where, f"c{n}", batch, group, cpu_files[n]))
               for n in range(procs)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - started
    if any(worker.exitcode != 0 for worker in workers):
        raise SystemExit(f"{kind} x{procs}: a coordinator process failed")
    cpu_s = sum(float(Path(name).read_text()) for name in cpu_files)
    for name in cpu_files:
        os.unlink(name)
    store = _open(kind, where)
    report = check(store.history(), store.items())
    shares = sorted(row.committed for row in store.status())
    store.close()
    if not (report.ok and report.complete):
        raise SystemExit(f"{kind} x{procs}: the checker failed:\n" + "\n".join(report.lines()))
    return {"store": kind, "commit": f"group of {batch}" if group else "one by one", "procs": procs,
            "items": items, "survives": STORES[kind][1], "wall_s": round(wall, 3),
            "commits_per_s": round(items / wall), "client_cpu_us": round(cpu_s / items * 1e6),
            "per_process": shares, "checker": "ok"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=600, help="work items per row, commits one by one")
    parser.add_argument("--group-items", type=int, default=4000, help="work items per row, group commits")
    parser.add_argument("--procs", default="1,2,4")
    parser.add_argument("--batch", type=int, default=32, help="leases per lease call = commits per group")
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--modes", default="one,group", help="one (commits one by one), group, or both")
    args = parser.parse_args()
    procs = [int(n) for n in args.procs.split(",")]
    kinds = args.stores.split(",")
    load_before = _uptime()
    server = None
    skipped = {}
    if any(kind.startswith("postgres") for kind in kinds):
        try:
            server = start_server(durable=True)
        except PgUnavailable as exc:
            for kind in [kind for kind in kinds if kind.startswith("postgres")]:
                skipped[kind] = str(exc)
                kinds.remove(kind)
            print(f"postgres: not measured: {exc}")
    rows: list[dict] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-shared-") as tmp:
            modes = [mode == "group" for mode in args.modes.split(",")]
            cases = [(group, n, kind) for group in modes for n in procs for kind in kinds]
            for number, (group, n, kind) in enumerate(cases):  # interleaved: every store at n, then n+1
                if kind.startswith("postgres"):
                    assert server is not None
                    import psycopg

                    schema = f"b{number}"
                    with psycopg.connect(server.dsn, autocommit=True) as conn:
                        conn.execute(f"CREATE SCHEMA {schema}")
                    where = f"{server.dsn} options='-c search_path={schema}'"
                else:
                    where = os.path.join(tmp, f"{number}-{kind}.sqlite")
                row = run_row(kind, where, n, args.group_items if group else args.items,
                              args.batch if group else 1, group)
                rows.append(row)
                print(f"{kind:>14} {row['commit']:>12} x{n}: {row['commits_per_s']:>6} commits/s "
                      f"({row['wall_s']} s) shares {row['per_process']}", flush=True)
    finally:
        if server is not None:
            server.stop()
    load_after = _uptime()
    one = {(row["store"], row["commit"]): row["commits_per_s"] for row in rows if row["procs"] == 1}
    table_rows = [[row["store"], row["survives"], row["commit"], row["procs"], row["items"], row["wall_s"],
                   row["commits_per_s"],
                   f"{row['commits_per_s'] / one[(row['store'], row['commit'])]:.2f}x"
                   if (row["store"], row["commit"]) in one else "", row["client_cpu_us"],
                   " / ".join(map(str, row["per_process"])), row["checker"]] for row in rows]
    headers = ["store", "a commit survives", "commits", "processes", "items", "wall s", "commits/s",
               "vs 1 process", "client CPU us/commit", "commits per process", "checker"]
    text = save(f"shared_store_b{args.batch}", headers, table_rows,
                {"load_before": load_before, "load_after": load_after, "batch": args.batch,
                 "skipped": skipped, "rows_raw": rows})
    print(text)
    print(f"load before: {load_before}\nload after:  {load_after}")


if __name__ == "__main__":
    main()
