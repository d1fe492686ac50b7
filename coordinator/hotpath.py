"""Accounts the coordinator's CPU per result by phase, dispatch-to-commit latency and start-up times.

The loop thread brackets its phases with `clock_ns()` and adds the difference to one int per
phase: nothing grows with the number of results. The per-result phases (decode, commit) and
the dispatch rounds are timed for one result (one `_fill` call) in SAMPLE and the sums scaled
up by SAMPLE: timing every one cost ~4 us of the ~45 us per result (bench/bench_loop.py, with
and without), about 8%; sampled it is the histogram add and a counter. `clock_ns` is the loop
thread's own CPU clock (`time.thread_time_ns`, ~0.2 us a call in this VM, three calls per
timed result), not wall time: on an oversubscribed machine wall time inside a phase also counts
the time the thread was preempted or waited for the GIL (the pump thread holds it), which made
the split meaningless under load (measured: the phases' wall time summed to more than the thread's CPU). The pump
thread's and the journal writer thread's CPU are read from their thread CPU clocks (found by
thread name) when fuzzer_stats is written, so neither needs a hook; `other` is the loop
thread's CPU outside the phases (asyncio, the turn, peers, logs).

Dispatch-to-commit latency goes into a fixed log-bucket histogram (8 buckets per octave, ~9 %
wide, 1 us to 4.5 h); p50/p99 are the midpoints of the buckets holding those ranks.

Everything counts from the first dispatch (`begin`), so seeding and hellos are not in the
per-result figures; they are reported as start-up times since the process started instead.
"""

from __future__ import annotations

import math
import os
import resource
import threading
import time
from enum import Enum
from typing import Any, Callable

IMPORTED_AT = time.time()
clock_ns = time.thread_time_ns  # what the phases are measured in (see above)
SAMPLE = 16  # one result and one dispatch round in SAMPLE is timed; the sums are scaled up

SUB = 8  # buckets per octave
EMIN = -20  # frexp exponent of the lowest bucket: 2**-21 s < 1 us
EMAX = 14  # 2**14 s = 4.5 h: the last bucket also holds everything above
N_BUCKETS = (EMAX - EMIN) * SUB


class Phase(Enum):
    """The coordinator's phases as fuzzer_stats names them (`coord_<phase>_us_per_result`)."""

    PUMP = "pump"  # the MPI pump thread's CPU (probe, receive, send, test)
    WRITER = "writer"  # the journal writer thread's CPU (sqlite transactions, queue/ files)
    DECODE = "decode"  # fence: decode + classify every RESULT frame
    COMMIT = "commit"  # commit path incl. the journal calls it makes (not the periodic flush)
    DISPATCH = "dispatch"  # _fill: scheduling, token minting, encoding, journal lease
    TICKER = "ticker"  # periodic work: stats, plot_data, status line, expiry, log checks
    FLUSH = "flush"  # the loop thread's side of journal flushes: prepare, hand over, finish, announce
    SEEDING = "seeding"  # journaling the seeds past the first ones while dispatch runs (seeding.py): start-up work
    OTHER = "other"  # loop thread CPU outside the phases above (asyncio, the turn, peers, logging)


def process_start_unix() -> float:
    """When this process started (Linux: /proc, 10 ms resolution), else when this module loaded."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        started_after_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started_after_boot
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):
        return IMPORTED_AT


class LogHistogram:
    """Counts of positive durations (seconds) in fixed log buckets; quantiles from the counts."""

    __slots__ = ("counts", "n", "total", "max")

    def __init__(self) -> None:
        self.counts = [0] * N_BUCKETS
        self.n = 0
        self.total = 0.0
        self.max = 0.0

    def add(self, seconds: float) -> None:
        self.n += 1
        self.total += seconds
        if seconds > self.max:
            self.max = seconds
        if seconds <= 0.0:
            self.counts[0] += 1
            return
        m, e = math.frexp(seconds)  # seconds = m * 2**e, 0.5 <= m < 1
        i = (e - EMIN) * SUB + int((m - 0.5) * (2 * SUB))
        self.counts[0 if i < 0 else i if i < N_BUCKETS else N_BUCKETS - 1] += 1

    @staticmethod
    def bounds(i: int) -> tuple[float, float]:
        """The [low, high) seconds of bucket i."""
        e, k = divmod(i, SUB)
        base = math.ldexp(1.0, e + EMIN)
        return base * (0.5 + k / (2 * SUB)), base * (0.5 + (k + 1) / (2 * SUB))

    def quantile(self, q: float) -> float:
        """The q-quantile (nearest rank), as the geometric middle of its bucket; 0 when empty."""
        if not self.n:
            return 0.0
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                lo, hi = self.bounds(i)
                return min(math.sqrt(lo * hi), self.max) if i else min(hi, self.max)
        return self.max


THREADS = {"mpi-pump": Phase.PUMP, "journal-writer": Phase.WRITER}  # thread name -> its phase


def _thread_cpu_s(ident: int | None) -> float | None:
    """CPU seconds of a live thread of this process (Linux/glibc), None when it cannot be read."""
    if ident is None:
        return None
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, AttributeError, OverflowError):
        return None


class HotPath:
    """The accumulators. The loop thread adds `*_ns`; `items()` turns them into fuzzer_stats rows."""

    __slots__ = ("decode_ns", "commit_ns", "dispatch_ns", "ticker_ns", "flush_ns", "seeding_ns", "latency", "started",
                 "marks", "first_dispatch", "stop_requested", "_threads", "_cpu0", "_cpu", "_loop_cpu0",
                 "_proc_cpu0", "_committed0", "_committed_at_stop", "fills", "files_cpu", "_files0")

    def __init__(self) -> None:
        self.decode_ns = self.commit_ns = self.dispatch_ns = self.ticker_ns = self.flush_ns = self.seeding_ns = 0
        self.fills = 0  # _fill calls: every SAMPLE-th is timed
        self.latency = LogHistogram()
        self.started = process_start_unix()
        self.marks: dict[str, float] = {}  # start-up phase -> seconds since the process started
        self.first_dispatch = 0.0  # unix time, 0 = not yet
        self.stop_requested = 0.0
        self._threads: dict[Phase, int] = {}  # the helper threads' idents, found at `begin`
        self._cpu0: dict[Phase, float] = {}
        self._cpu: dict[Phase, float] = {}  # last reading (kept once a thread has ended)
        self._loop_cpu0 = self._proc_cpu0 = 0.0
        self._committed0 = 0
        self._committed_at_stop = -1
        # The writer thread's CPU in its backlog of queue/ files (writer.py), read from the writer:
        # part of the writer's phase, and reported apart, since it is the seeds' (start-up) work.
        self.files_cpu: Callable[[], float] | None = None
        self._files0 = 0.0

    def mark(self, phase: str) -> None:
        """A start-up phase ended now (`startup_<phase>_s` in fuzzer_stats)."""
        self.marks[phase] = time.time() - self.started

    def begin(self, committed: int = 0) -> None:
        """Dispatching starts: zero the accumulators (seeding is start-up, not per-result cost)."""
        if self.first_dispatch:
            return
        self.first_dispatch = time.time()
        self.marks["first_dispatch"] = self.first_dispatch - self.started
        self.decode_ns = self.commit_ns = self.dispatch_ns = self.ticker_ns = self.flush_ns = self.seeding_ns = 0
        self.latency = LogHistogram()
        self._threads = {THREADS[t.name]: t.ident for t in threading.enumerate()
                         if t.name in THREADS and t.ident is not None}
        self._cpu0 = {p: _thread_cpu_s(ident) or 0.0 for p, ident in self._threads.items()}
        self._cpu = dict(self._cpu0)
        self._loop_cpu0 = time.thread_time()
        self._proc_cpu0 = self._process_cpu()
        self._files0 = self.files_cpu() if self.files_cpu is not None else 0.0
        self._committed0 = committed

    def stopping(self, committed: int) -> None:
        """The stop was requested: the dispatch window (first dispatch to now) ends here."""
        if not self.stop_requested:
            self.stop_requested = time.time()
            self._committed_at_stop = committed

    def window_rate(self, committed: int) -> float:
        """Results committed per second between the first dispatch and the stop request (or now):
        the steady rate, without the drain and stop that `results_per_sec` also counts."""
        if not self.first_dispatch:
            return 0.0
        end = self.stop_requested or time.time()
        n = (self._committed_at_stop if self.stop_requested else committed) - self._committed0
        return n / max(end - self.first_dispatch, 1e-9)

    @staticmethod
    def _process_cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_utime + ru.ru_stime

    def items(self, committed: int) -> dict[str, Any]:
        """fuzzer_stats rows. Call on the loop thread (it reads the loop thread's CPU clock)."""
        for p, ident in self._threads.items():
            now = _thread_cpu_s(ident)
            if now is not None:
                self._cpu[p] = now
        started = bool(self.first_dispatch)
        loop_cpu = time.thread_time() - self._loop_cpu0 if started else 0.0
        proc_cpu = self._process_cpu() - self._proc_cpu0 if started else 0.0
        threads = {p: self._cpu.get(p, 0.0) - self._cpu0.get(p, 0.0) for p in THREADS.values()}
        n = max(committed - self._committed0, 0)
        phases_s = {Phase.DECODE: SAMPLE * self.decode_ns / 1e9, Phase.COMMIT: SAMPLE * self.commit_ns / 1e9,
                    Phase.DISPATCH: SAMPLE * self.dispatch_ns / 1e9, Phase.TICKER: self.ticker_ns / 1e9,
                    Phase.FLUSH: self.flush_ns / 1e9, Phase.SEEDING: self.seeding_ns / 1e9}
        per = {**threads, **phases_s, Phase.OTHER: max(loop_cpu - sum(phases_s.values()), 0.0)}
        files_s = self.files_cpu() - self._files0 if started and self.files_cpu is not None else 0.0
        rows: dict[str, Any] = {
            "coord_process_cpu_s": round(proc_cpu, 4),
            "coord_loop_cpu_s": round(loop_cpu, 4),
            **{f"coord_{p.value}_cpu_s": round(s, 4) for p, s in threads.items()},
            **{f"coord_{p.value}_s": round(s, 4) for p, s in phases_s.items()},
            "coord_cpu_us_per_result": round(1e6 * proc_cpu / n, 2) if n else 0.0,
            **{f"coord_{p.value}_us_per_result": round(1e6 * s / n, 2) if n else 0.0 for p, s in per.items()},
            "coord_queue_files_cpu_s": round(files_s, 4),  # of the writer's: the queue/ files' backlog
            "coord_queue_files_us_per_result": round(1e6 * files_s / n, 2) if n else 0.0,
            "window_results_per_sec": round(self.window_rate(committed), 2),
            "commit_latency_count": self.latency.n,
            "commit_latency_p50_ms": round(1e3 * self.latency.quantile(0.50), 3),
            "commit_latency_p99_ms": round(1e3 * self.latency.quantile(0.99), 3),
            "commit_latency_max_ms": round(1e3 * self.latency.max, 3),
            "process_start_time": round(self.started, 3),
            "first_dispatch_time": round(self.first_dispatch, 3),
            "stop_requested_time": round(self.stop_requested, 3),
        }
        rows.update({f"startup_{k}_s": round(v, 3) for k, v in self.marks.items() if k != "first_dispatch"})
        rows["first_dispatch_s"] = round(self.marks.get("first_dispatch", 0.0), 3)
        return rows
