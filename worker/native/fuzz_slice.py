"""The native mutation slice's child side: havoc through the AFL++ forkserver for one time slice.

Run as ``python -m symfence.worker.childserve symfence.worker.native.fuzz_slice ...`` by
``worker.executors.native_fuzz``. A request names the target, the slice's options
(``protocol.options.NativeFuzzOptions``) and ``corpus_dir``: the worker's folder of corpus
entries for that target (one file per entry, named by sha1; ``tokens`` holds the dictionary as
msgpack). The slice

1. runs every entry it has not seen yet through the forkserver (calibration) and merges its
   trace into this child's local map of the target (AFL's virgin bits: hit-count buckets);
2. until ``slice_s`` is used up (calibration included) or ``max_execs``: picks a corpus entry
   (recent finds more often), mutates it (``worker.native.mutate``, seeded by the task's work id
   and bound) and runs it;
3. keeps an input whose trace has a new edge or a new hit-count bucket of the local map (written
   to ``corpus_dir``, used by the following mutations, returned as a candidate), and returns a
   crash or a hang whose trace is new to the crash (hang) map of this slice.

The local map lives as long as the child: a fresh child calibrates the folder again. Traces are
salted per target as the native engine's are (``runner.target_salt``). The parent owns the
clock (``executors.native_fuzz``): the slice streams ``Entered(ENGINE)`` once and ``Found`` per
finding, so a slice killed at its deadline still returns what it found. SIGUSR1
(``ChildExecutor.end_turn``: an engine task or a re-run waits behind the slice, or the campaign
drains) ends the slice after its current execution, with its answer as usual.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import msgpack

from symfence.protocol.coverage import MAP_SIZE, bucket
from symfence.protocol.options import NativeFuzzOptions
from symfence.worker.childserve import Events
from symfence.worker.childwire import RunTask
from symfence.worker.engine_api import CandidateOut, ExitKind, Outcome, Phase
from symfence.worker.native.base import NativeError, RunKind
from symfence.worker.native.mutate import Mutator
from symfence.worker.native.runner import salted, target_salt

TOKENS_FILE = "tokens"
MAX_FINDINGS = 32  # crashes + hangs per slice (each new to this slice's crash / hang map)
MAX_RESULT_BYTES = 4 << 20  # kept inputs' bytes per result (the rest stay in corpus_dir)
RECENT_ONE_IN = 2  # one pick in this many is among the latest RECENT entries
RECENT = 16
_cut = [False]  # SIGUSR1 came: the running slice ends after its current execution


def is_entry_name(name: str) -> bool:
    return len(name) == 40 and all(c in "0123456789abcdef" for c in name)


def new_bits(virgin: bytearray, trace: dict[int, int]) -> int:
    """AFL's verdict for a trace against a map of seen buckets, recording it: 0, 1 or 2."""
    verdict = 0
    for index, count in trace.items():
        bits = bucket(count)
        old = virgin[index]
        if bits & ~old:
            virgin[index] = old | bits
            verdict = 2 if old == 0 else max(verdict, 1)
    return verdict


@dataclass
class _Target:
    virgin: bytearray = field(default_factory=lambda: bytearray(MAP_SIZE))
    pool: list[bytes] = field(default_factory=list)  # entries that run OK, in the order seen
    seen: set[str] = field(default_factory=set)  # file names calibrated (or refused)


class SliceRunner:
    """The child-side handler: forkservers and local maps kept between slices."""

    def __init__(self, work_dir: str):
        self.work_dir = work_dir or None
        self.oracles: dict[tuple, Any] = {}
        self.targets: dict[tuple[str, str], _Target] = {}

    def oracle(self, target: str, opts: NativeFuzzOptions) -> Any:
        key = (opts.afl_path(target), opts.input, opts.exec_timeout_s, opts.target_mem_limit_mb)
        if key not in self.oracles:
            from symfence.worker.native.forkserver import ForkserverOracle

            self.oracles[key] = ForkserverOracle(key[0], input_mode=opts.input,
                                                 exec_timeout_s=opts.exec_timeout_s,
                                                 mem_limit_mb=opts.target_mem_limit_mb,
                                                 work_dir=self.work_dir)
        return self.oracles[key]

    def run(self, request: RunTask, events: Events) -> Outcome:
        task = request.task
        options = dict(task.options)
        corpus_dir = options.pop("corpus_dir", "")
        try:
            opts = NativeFuzzOptions.from_mapping(options)
            if type(corpus_dir) is not str or not os.path.isdir(corpus_dir):
                raise ValueError(f"native fuzz slice: corpus_dir {corpus_dir!r} is not a folder")
            _cut[0] = False  # before ENGINE: the parent asks for a cut only once it sees the task run
            events.entered(Phase.ENGINE)
            return self.slice(task.target, corpus_dir, f"{task.work_id}:{task.bound}", opts, events)
        except (ValueError, NativeError) as exc:
            return Outcome(ExitKind.ERROR, error=f"native fuzz slice: {exc}")

    def slice(self, target: str, corpus_dir: str, seed: str, opts: NativeFuzzOptions,
              events: Events | None = None) -> Outcome:
        t0, c0 = time.monotonic(), time.process_time()
        deadline = t0 + opts.slice_s
        oracle = self.oracle(target, opts)
        state = self.targets.setdefault((target, corpus_dir), _Target())
        salt = target_salt(target)
        crash_map, hang_map = bytearray(MAP_SIZE), bytearray(MAP_SIZE)
        kept: list[CandidateOut] = []
        findings: list[CandidateOut] = []
        execs = calibrated = kept_total = 0

        def done() -> bool:
            return _cut[0] or time.monotonic() >= deadline or bool(opts.max_execs and execs >= opts.max_execs)

        def finding(data: bytes, kind: ExitKind, trace: dict[int, int], detail: str) -> None:
            seen = hang_map if kind is ExitKind.HANG else crash_map
            if len(findings) >= MAX_FINDINGS or not new_bits(seen, trace):
                return
            found = CandidateOut(data, salted(trace, salt), kind, 0, detail)
            findings.append(found)
            if events is not None:
                events.found(found)

        for name in sorted(os.listdir(corpus_dir)):  # calibration: entries new to this child
            if done():
                break
            if name in state.seen or not is_entry_name(name):
                continue
            state.seen.add(name)
            with open(os.path.join(corpus_dir, name), "rb") as fh:
                data = fh.read()
            run = oracle.run(data)
            execs += 1
            calibrated += 1
            if run.kind is RunKind.OK:
                new_bits(state.virgin, dict(run.trace))
                state.pool.append(data)
        if not state.pool:
            state.pool.append(b"\0")  # nothing runs cleanly yet: mutate from one zero byte
        mutator = Mutator(seed, max_len=opts.max_len, tokens=self._tokens(corpus_dir))
        rng, pool = mutator.rng, state.pool
        size = 0
        while not done():
            if rng.randrange(RECENT_ONE_IN) == 0:
                parent = pool[len(pool) - 1 - rng.randrange(min(RECENT, len(pool)))]
            else:
                parent = pool[rng.randrange(len(pool))]
            data = mutator.mutate(parent, pool)
            run = oracle.run(data)
            execs += 1
            trace = dict(run.trace)
            if run.kind is RunKind.OK:
                if new_bits(state.virgin, trace):
                    pool.append(data)
                    kept_total += 1
                    name = hashlib.sha1(data).hexdigest()
                    state.seen.add(name)
                    with open(os.path.join(corpus_dir, name), "wb") as fh:
                        fh.write(data)
                    if len(kept) < opts.max_candidates and size + len(data) <= MAX_RESULT_BYTES:
                        kept.append(CandidateOut(data, salted(trace, salt), ExitKind.OK, 0))
                        size += len(data)
            else:
                kind = ExitKind.HANG if run.kind is RunKind.HANG else ExitKind.CRASH
                finding(data, kind, trace, run.detail)
        wall = time.monotonic() - t0
        stats = {"native_fuzz_slices": 1, "native_fuzz_calibrated": calibrated,
                 "native_fuzz_kept": kept_total, "native_fuzz_findings": len(findings),
                 "native_fuzz_corpus": len(pool)}
        return Outcome(ExitKind.OK, {}, (*kept, *findings), wall_s=wall, cpu_s=time.process_time() - c0,
                       execs=execs, stats=stats)

    @staticmethod
    def _tokens(corpus_dir: str) -> list[bytes]:
        path = os.path.join(corpus_dir, TOKENS_FILE)
        if not os.path.exists(path):
            return []
        with open(path, "rb") as fh:
            tokens = msgpack.unpackb(fh.read(), raw=False)
        return [t for t in tokens if type(t) is bytes and t]

    def close(self) -> None:
        for oracle in self.oracles.values():
            try:
                oracle.close()
            except Exception:  # noqa: BLE001
                pass


def _on_cut(signum: int, frame: object) -> None:
    _cut[0] = True


def handler(scratch_dir: str) -> SliceRunner:
    signal.signal(signal.SIGUSR1, _on_cut)
    return SliceRunner(scratch_dir)
