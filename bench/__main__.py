"""Run every benchmark in one command (`python -m bench`, or `make bench`); tables + JSON in bench/results/."""

from __future__ import annotations

import argparse
import runpy
import sys
import time

BENCHES = {
    "compare": "bench.bench_compare",  # farm vs pool vs symfence, util, hosts, busy, scale, goals (~10-20 min)
    "hotpath": "bench.bench_hotpath",  # CPU cost of the coordinator's own accounting per result (seconds)
    "pipeline": "bench.bench_pipeline",  # results/s and utilisation at depth 1/2/4
    "auto_depth": "bench.bench_auto_depth",  # dispatch.depth = "auto" vs fixed 1/2/4/8 at 0/1/10 ms tasks
    "journal": "bench.bench_journal",  # group commit cost, journal on vs off
    "concolic": "bench.bench_concolic",  # executions/s of the embedded engine
    "hybrid": "bench.bench_hybrid",  # concolic 1 vs 2 workers vs random mutation
    "recovery": "bench.bench_recovery",  # worker loss -> re-dispatch, CANCEL abort savings
    "busy": "bench.bench_busy",  # busy share per worker, engine only vs + slices, native + Python (~5 min)
    "native": "bench.bench_native",  # native: execs/s, forkserver vs afl-showmap, vs afl-fuzz (~6 min)
    "parsers": "bench.bench_parsers",  # real parsers: hybrid vs concolic vs plain Atheris (~25 min)
    "tracer": "bench.bench_tracer",  # cost per execution of the real-trace yardstick (coverage.py arcs)
    "oversized": "bench.bench_oversized",  # a 2.1 GB frame to rank 0: drained at the probe vs received
    "stop": "bench.bench_stop",  # stop latency: budget end / Ctrl-C to exit, demo and a 160,000-seed corpus (~6 min)
    "hosts": "bench.bench_hosts",  # across namespace hosts: 0/50 ms round trip, depth 1/4/auto (root; ~2 min)
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, add_help=False)
    p.add_argument("only", nargs="*", help=f"run only these of {', '.join(BENCHES)} (default: all)")
    argv = sys.argv[1:]
    names = [a for a in argv[:1] if a in BENCHES]
    if {"-h", "--help"} & set(argv) and not names:
        p.print_help()
        return
    args, rest = p.parse_known_args(argv)  # options after the name(s) go to the benchmark itself:
    unknown = set(args.only) - set(BENCHES)  # `python -m bench compare --only util --duration 2`
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    if rest and len(args.only) != 1:
        p.error(f"options {' '.join(rest)} need exactly one benchmark named before them")
    for name in args.only or BENCHES:
        print(f"\n## {name} ({time.strftime('%Y-%m-%d %H:%M:%S')})\n", flush=True)
        sys.argv = [BENCHES[name], *rest]
        runpy.run_module(BENCHES[name], run_name="__main__")


if __name__ == "__main__":
    main()
