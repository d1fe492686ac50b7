"""AFL++'s file formats: the fuzzer_stats keys and plot_data columns its tools read, carried over --resume.

``afl-whatsup`` sources ``fuzzer_stats`` as shell assignments and reads ``run_time``,
``fuzzer_pid``, ``execs_done``, ``corpus_count``, ``cur_item``, ``pending_favs``,
``pending_total``, ``saved_crashes``, ``last_find``/``last_crash``/``last_hang`` (unix seconds),
``cycles_done``, ``cycles_wo_finds``, ``exec_timeout`` and ``bitmap_cvg``; ``afl-plot`` reads
``afl_banner`` and plot_data columns 1-13 by position. So the AFL++ 4.x keys come first, in
AFL++'s order and meaning, then symfence's own; plot_data has AFL++'s 13 columns first and
symfence's after them. Keys AFL++ writes that symfence has no honest value for (stability,
slowest_exec_ms, cpu_affinity, test-case cache) are left out rather than invented.

What AFL++ keeps across a restart, symfence keeps in the journal's counters (``afl_*``):
``start_time`` is moved back by the earlier runs' total run time (as AFL++ does), and
``run_time``, ``execs_done``, total crashes and time-outs, the last-find times and plot_data's
time axis continue from where the previous run stopped.
"""

from __future__ import annotations

import collections
import os
import re
import resource
import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from symfence.protocol.coverage import MAP_SIZE

# plot_data: AFL++'s columns (afl-plot reads them by position), then symfence's.
AFL_PLOT_COLUMNS = (
    "relative_time", "cycles_done", "cur_item", "corpus_count", "pending_total", "pending_favs",
    "map_size", "saved_crashes", "saved_hangs", "max_depth", "execs_per_sec", "total_execs",
    "edges_found",
)
SYMFENCE_PLOT_COLUMNS = ("committed", "quarantined", "in_flight", "task_errors", "saved_oom", "results_per_sec")

_CARRIED = ("run_time_ms", "execs", "total_crashes", "total_tmout", "last_find", "last_crash", "last_hang",
            "execs_at_last_crash", "max_depth")
COUNTER_PREFIX = "afl_"
_BANNER_SAFE = re.compile(r"[^A-Za-z0-9_.:+/@ -]")


@dataclass
class AflState:
    """AFL++-style bookkeeping, with what earlier runs of the campaign left (``prev_*``)."""

    run_started: float = field(default_factory=time.time)  # wall time this run began dispatching
    prev_run_time_ms: int = 0
    prev_execs: int = 0
    prev_total_crashes: int = 0
    prev_total_tmout: int = 0
    last_find: int = 0  # unix seconds of the newest corpus entry (0: none yet)
    last_crash: int = 0
    last_hang: int = 0
    execs_at_last_crash: int = 0
    max_depth: int = 1  # generations: seeds are depth 1, an input made from depth d has d + 1
    cur_item: int = 0  # queue id of the input dispatched last
    depth_of: dict[int, int] = field(default_factory=dict)
    _window: collections.deque[tuple[float, int]] = field(default_factory=lambda: collections.deque(maxlen=4096))

    # --- resume -------------------------------------------------------------------------------

    @classmethod
    def from_counters(cls, counters: Mapping[str, int]) -> AflState:
        def get(name: str) -> int:
            return int(counters.get(COUNTER_PREFIX + name, 0))

        return cls(prev_run_time_ms=get("run_time_ms"), prev_execs=get("execs"),
                   prev_total_crashes=get("total_crashes"), prev_total_tmout=get("total_tmout"),
                   last_find=get("last_find"), last_crash=get("last_crash"), last_hang=get("last_hang"),
                   execs_at_last_crash=get("execs_at_last_crash"), max_depth=max(1, get("max_depth")))

    def counters(self, execs: int, total_crashes: int, total_tmout: int, now: float) -> dict[str, int]:
        """What the journal keeps for the next --resume (cumulative over every run)."""
        values = {
            "run_time_ms": self.run_time_ms(now), "execs": self.prev_execs + execs,
            "total_crashes": self.prev_total_crashes + total_crashes,
            "total_tmout": self.prev_total_tmout + total_tmout, "last_find": self.last_find,
            "last_crash": self.last_crash, "last_hang": self.last_hang,
            "execs_at_last_crash": self.execs_at_last_crash, "max_depth": self.max_depth,
        }
        assert set(values) == set(_CARRIED)
        return {COUNTER_PREFIX + k: int(v) for k, v in values.items()}

    # --- events -------------------------------------------------------------------------------

    def run_time_ms(self, now: float) -> int:
        return self.prev_run_time_ms + max(0, int((now - self.run_started) * 1000))

    def entry(self, queue_id: int, parent: int | None, now: float, *, seed: bool = False) -> None:
        depth = 1 if parent is None else self.depth_of.get(parent, 1) + 1
        self.depth_of[queue_id] = depth
        self.max_depth = max(self.max_depth, depth)
        if not seed:
            self.last_find = int(now)

    def seeds(self, queue_ids: Iterable[int]) -> None:
        """`entry(seed=True)` for many seeds at once (depth 1; no find time)."""
        self.depth_of.update(dict.fromkeys(queue_ids, 1))

    def crash(self, now: float, execs: int) -> None:
        self.last_crash = int(now)
        self.execs_at_last_crash = self.prev_execs + execs

    def hang(self, now: float) -> None:
        self.last_hang = int(now)

    def sample(self, now: float, execs: int) -> float:
        """Record total execs at ``now``; the exec rate over the last minute."""
        self._window.append((now, execs))
        while len(self._window) > 1 and now - self._window[0][0] > 60.0:
            self._window.popleft()
        t0, e0 = self._window[0]
        return (execs - e0) / (now - t0) if now > t0 else 0.0

    # --- the files ----------------------------------------------------------------------------

    def stats_items(self, *, now: float, execs: int, execs_last_min: float, corpus: int, seeds: int,
                    imported: int, pending: int, pending_favs: int, edges: int, saved_crashes: int, saved_hangs: int,
                    cycles_done: int, exec_timeout_ms: int, banner: str, command_line: str,
                    total_tmout: int) -> list[tuple[str, object]]:
        run_ms = max(self.run_time_ms(now), 1)
        total_execs = self.prev_execs + execs
        return [
            ("start_time", int(self.run_started - self.prev_run_time_ms / 1000)),
            ("last_update", int(now)),
            ("run_time", run_ms // 1000),
            ("fuzzer_pid", os.getpid()),
            ("cycles_done", cycles_done),
            ("cycles_wo_finds", 0 if cycles_done == 0 or self.last_find else cycles_done),
            ("execs_done", total_execs),
            ("execs_per_sec", f"{total_execs * 1000 / run_ms:.2f}"),
            ("execs_ps_last_min", f"{execs_last_min:.2f}"),
            ("corpus_count", corpus),
            ("corpus_favored", 0),
            ("corpus_found", max(0, corpus - seeds - imported)),
            ("corpus_imported", imported),
            ("corpus_variable", 0),
            ("max_depth", self.max_depth),
            ("cur_item", self.cur_item),
            ("pending_favs", pending_favs),
            ("pending_total", pending),
            ("bitmap_cvg", f"{100.0 * edges / MAP_SIZE:.2f}%"),
            ("saved_crashes", saved_crashes),
            ("saved_hangs", saved_hangs),
            ("last_find", self.last_find),
            ("last_crash", self.last_crash),
            ("last_hang", self.last_hang),
            ("execs_since_crash", total_execs - self.execs_at_last_crash),
            ("exec_timeout", exec_timeout_ms),
            ("peak_rss_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10),
            ("edges_found", edges),
            ("total_edges", MAP_SIZE),
            ("total_tmout", self.prev_total_tmout + total_tmout),
            ("afl_banner", _BANNER_SAFE.sub("_", banner)[:100]),
            ("afl_version", _afl_version()),
            ("target_mode", "symfence"),
            ("command_line", command_line),
        ]

    def plot_values(self, *, now: float, execs: int, eps: float, cycles_done: int, corpus: int,
                    pending: int, pending_favs: int, edges: int, saved_crashes: int,
                    saved_hangs: int) -> list[object]:
        """AFL++'s 13 plot_data values, in its order."""
        return [self.run_time_ms(now) // 1000, cycles_done, self.cur_item, corpus, pending, pending_favs,
                f"{100.0 * edges / MAP_SIZE:.2f}%", saved_crashes, saved_hangs, self.max_depth,
                f"{eps:.2f}", self.prev_execs + execs, edges]


def plot_header(extra_columns: tuple[str, ...] = ()) -> str:
    return "# " + ", ".join((*AFL_PLOT_COLUMNS, *SYMFENCE_PLOT_COLUMNS, *extra_columns)) + "\n"


def _afl_version() -> str:
    import symfence

    return f"symfence-{symfence.__version__}"
