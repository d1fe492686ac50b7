"""`mpi4py.futures.MPIPoolExecutor` doing no-op tasks: the plain pool symfence is compared against.

`mpiexec -n 4 python -m mpi4py.futures -m bench.pool --duration 5`: rank 0 runs this module,
the other ranks are the pool's workers. It submits `batch` no-op tasks (chunksize 1: one task a
message) and waits for every result, again and again until the duration is up. Prints one JSON
line.
"""

from __future__ import annotations

import argparse
import json
import time


def noop(x: int) -> int:
    return x


def main() -> None:
    from mpi4py.futures import MPIPoolExecutor

    from bench import pool as this  # pickled as bench.pool.noop (importable by the workers)

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--batch", type=int, default=300)
    args = p.parse_args()
    with MPIPoolExecutor() as ex:
        ex.submit(this.noop, 0).result()  # the workers are up
        done = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < args.duration:
            futures = [ex.submit(this.noop, i) for i in range(args.batch)]
            for f in futures:
                f.result()
            done += len(futures)
        elapsed = time.perf_counter() - t0
        workers = ex.num_workers
    print(json.dumps({"results": done, "elapsed_s": elapsed, "results_per_sec": done / elapsed,
                      "workers": workers, "batch": args.batch}), flush=True)


if __name__ == "__main__":
    main()
