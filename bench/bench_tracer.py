"""Cost of the real-trace yardstick per execution: plain call vs coverage.py's arc tracer.

For each target, one short Atheris slice (``FuzzExecutor``, no tracing) collects realistic
inputs; then each input runs plainly and under ``ArcTracer`` in this process (median of
``--repeat`` passes), and once more through the tracer child (``TraceClient``: pipe round trip
included, which is what a worker pays per candidate). Prints a markdown table, saves JSON.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.common import save
from symfence.protocol.fuzzslice import SliceSpec, pack_spec
from symfence.worker.executors.base import Task
from symfence.worker.executors.fuzz import FuzzExecutor
from symfence.worker.realtrace.client import TraceClient
from symfence.worker.realtrace.tracer import ArcTracer, load_callable, resolve_include

TARGETS = (
    "examples.parsers.toml_document:target",
    "examples.parsers.plist_binary:target",
    "examples.parsers.email_message:target",
    "examples.parsers.tar_archive:target",
    "examples.magic_header:target",
    "examples.keyvalue:target",
)


def inputs_for(target: str, slice_s: float) -> list[bytes]:
    ex = FuzzExecutor()
    try:
        ex.start(Task("0" * 64, "0" * 64, pack_spec(SliceSpec((b"\x00",), ())), target, 0,
                      {"slice_s": slice_s, "exec_timeout_s": 1.0}))
        while (outcome := ex.wait(0.1)) is None:
            pass
    finally:
        ex.close()
    return [c.data for c in outcome.candidates if c.kind.value == "ok"] or [b"\x00"]


def per_exec_us(run, inputs: list[bytes], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for data in inputs:
            run(data)
        samples.append((time.perf_counter() - t0) / len(inputs) * 1e6)
    return statistics.median(samples)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--slice", type=float, default=3.0, help="seconds of fuzzing to collect inputs per target")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    rows = []
    client = TraceClient()
    try:
        for target in TARGETS:
            inputs = inputs_for(target, args.slice)
            module, fn = load_callable(target)
            tracer = ArcTracer(resolve_include([], module))

            def plain(data: bytes) -> None:
                try:
                    fn(data)
                except Exception:  # noqa: BLE001 - findings are not the point here
                    pass

            plain_us = per_exec_us(plain, inputs, args.repeat)
            traced_us = per_exec_us(lambda d: tracer.run(fn, d, 5.0), inputs, args.repeat)
            client.submit(target, [], 5.0, inputs)  # warm-up: the child imports the target
            while client.poll(1.0) is None:
                pass
            t0 = time.perf_counter()
            client.submit(target, [], 5.0, inputs)
            while client.poll(1.0) is None:
                pass
            child_us = (time.perf_counter() - t0) / len(inputs) * 1e6
            edges = statistics.mean(len(tracer.run(fn, d, 5.0).trace) for d in inputs)
            rows.append([target, len(inputs), f"{plain_us:.1f}", f"{traced_us:.1f}",
                         f"{traced_us - plain_us:.1f}", f"{traced_us / max(plain_us, 1e-9):.1f}x",
                         f"{child_us:.1f}", f"{edges:.0f}"])
            print(rows[-1], flush=True)
    finally:
        client.close()
    headers = ["target", "inputs", "plain us/exec", "traced us/exec", "tracer cost us/exec", "slowdown",
               "tracer child us/input (pipe incl.)", "edges/input"]
    print(save("tracer", headers, rows))


if __name__ == "__main__":
    main()
