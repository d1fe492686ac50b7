"""Chooses each rank's dispatch depth from measured round trip and task time (dispatch.depth = "auto").

Little's law: a worker stays busy when the dispatches in flight to it cover the task it runs
plus the time the next WORK needs to reach it after it answers (its result travelling to the
coordinator, the coordinator's turnaround, the WORK travelling back):

    needed = 1 + round_trip / per_task        (per_task: the task plus the worker's own overhead)

Sans-IO: the coordinator calls `observe(rank, sent_at, now, wall_s)` for each committed result
(loop-clock times of the dispatch and of the commit, the worker-reported `cost.wall_s`),
`short(rank)` when it had no work to fill the rank with, and reads `depth(rank)` when it fills.
Everything is measured per rank, over periods of `every` results:

- task time: a running estimate (EWMA over periods) of the periods' mean `wall_s`; two
  periods in a row whose means are `step` times off the same way replace it (it changed);
- worker overhead: the (lower) median gap `now - wall_s - last` between a result and the previous one
  (`last`) over the period's pipelined results (WORK sent before `last`: it was queued);
- per result: the period's length / its results. Results of one rank arrive in order, so the
  sum of the gaps telescopes and jitter in single arrival times cancels out;
- starved: a period clearly longer than its tasks plus overhead (the worker waited for WORK).
  Its round trip is the (lower) median of `now - wall_s - sent_at` over the results whose WORK
  the worker waited for: sent after the previous result arrived, or with a gap well over the
  overhead (a queued WORK's `now - wall_s - sent_at` is its time in the queue, not the round
  trip). Failing those, with `depth` in flight and the worker waiting once a cycle, per result =
  (per_task + round_trip) / depth. The estimate moves (EWMA) only after `starved_after` starved
  periods in a row, by the least of them (one stall of the coordinator is not a trend); periods
  in which the rank ran out of work do not count. Until the first estimate, periods are half as
  long (`every // 2` results): at the start nothing is known and waiting costs most. A period that was not
  starved measures no round trip (the queue hides it): the last estimate stands.

The ramp. Periods are slow to start: at depth 2 with a 50 ms round trip and 10 ms tasks a result
comes every 30 ms, and two starved periods take ~0.5 s at a third of the worker's speed. So until
the rank's round trip is known, each result whose WORK found the worker idle (sent after the
previous result arrived, or with a gap beyond the overhead: the same test as a period's waits) is
a round trip measured directly, from the rank's first result on (start-up can only lengthen a
trip, and the least of `ramp_samples` is taken). Once `ramp_samples` of them are in and Little's
law asks for at least `ramp_factor` times the current depth (the worker is busy at most half the
time), the depth jumps to `ceil(margin * needed)`, at most `free_depth` (raises above it must
pay, below), the round trip becomes the rank's estimate, and the period starts afresh at the new
depth. A worker that is merely a little short is left to the periods.

At the end of each period the rank's depth becomes `ceil(margin * needed)` if that is higher; it
is lowered only when even `lower_margin` (> margin) fits under the current depth at `lower_after`
period ends in a row, so noise around a boundary does not make it flap. Depths stay in
[1, max_depth].

A raise must pay. Above `free_depth` (8, the old fixed ceiling) a raise is checked at the next
period end: Little's law predicts the period's time per result at both depths
(max(per_task, (per_task + round_trip) / depth)); if the rank did not get at least half of the
predicted gain, the wait was not a round trip that more depth hides (a saturated coordinator's
turnaround grows with what is in flight): the depth goes back and that becomes the rank's
ceiling until its task time changes. So `max_depth` (`dispatch.max_depth`, default 32) is
reached only where it helps: 50 ms round trips with 10 ms tasks need 6-7 in flight (auto picks
about 8-10), with 1 ms tasks about 50 (auto stops at max_depth: set it higher for such links).

Limitation: a round trip that shrinks while the task time stays put is not seen once the worker
never waits (nothing then measures it): the depth stays, which costs latency, not throughput.
A change of task time is always followed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from symfence.protocol.ids import Rank


@dataclass(frozen=True)
class DepthTuning:
    """The controller's constants (only `max_depth` is a config key: `dispatch.max_depth`)."""

    max_depth: int = 32
    start_depth: int = 2  # before anything is measured: the fixed default
    free_depth: int = 8  # raises above this must pay (time per result falls as predicted), or are undone
    pay_share: float = 0.5  # ... by at least this share of the predicted gain
    margin: float = 1.5  # raise to ceil(margin * needed) ...
    lower_margin: float = 2.5  # ... lower only once ceil(lower_margin * needed) < the depth
    lower_after: int = 3  # period ends in a row that agree before lowering
    every: int = 16  # results per measuring period
    warmup: int = 3  # a rank's first results are not measured (start-up is not round trip)
    starved_after: int = 2  # starved periods in a row before their round trip is believed
    idle_fraction: float = 0.05  # starved: per result > per_task * (1 + this) + idle_min_s
    idle_min_s: float = 20e-6
    step: float = 2.0  # a period's mean task time this many times off the estimate replaces it
    wait_fraction: float = 0.1  # a pipelined result waited if its gap exceeds the overhead by this * per_task
    smoothing: float = 0.5  # weight of a period's task time and round trip in their running estimates
    ramp_samples: int = 2  # the ramp: directly measured round trips (the least counts) before it jumps ...
    ramp_factor: float = 2.0  # ... and only if Little's law asks for at least this times the depth

    def __post_init__(self) -> None:
        if self.max_depth < 1 or self.start_depth < 1:
            raise ValueError("depths must be >= 1")
        if not 1 <= self.margin < self.lower_margin:
            raise ValueError("need 1 <= margin < lower_margin")
        if self.every < 2 or self.starved_after < 1 or self.lower_after < 1:
            raise ValueError("every >= 2, starved_after >= 1, lower_after >= 1")
        if self.ramp_samples < 1 or self.ramp_factor <= 1:
            raise ValueError("ramp_samples >= 1, ramp_factor > 1")


@dataclass(slots=True)
class RankDepth:
    """What is known about one rank (all times in seconds)."""

    depth: int
    task_s: float | None = None  # running estimate of the periods' mean wall_s
    task_off: int = 0  # the last period's mean was step x above (1) or below (-1) the estimate
    overhead_s: float = 0.0  # the worker's time between two queued tasks
    round_trip_s: float | None = None
    last_result: float | None = None
    last_per_result: float = 0.0  # the last period's time per result
    results: int = 0  # counted during the warm-up only
    # the current period
    period_start: float | None = None
    n: int = 0
    wall_sum: float = 0.0
    gaps: list[tuple[float, float]] = field(default_factory=list)  # (gap, trip) of pipelined results
    waits: list[float] = field(default_factory=list)  # trips of results whose WORK found the worker idle
    ran_short: bool = False
    # across periods
    starved: list[float] = field(default_factory=list)  # round trips of the starved periods in a row
    lower_streak: int = 0
    changes: int = 0
    history: list[int] = field(default_factory=list)  # depths chosen, in order (the first is the start)
    ceiling: int | None = None  # after a raise that did not pay: the most it gets (until its task time changes)
    probe: tuple[int, float] | None = None  # a raise above free_depth on trial: (depth before, predicted)
    # the ramp (until the round trip is known): the last round trips measured directly
    ramp_trips: list[float] = field(default_factory=list)


class DepthController:
    """Per-rank dispatch depths for `dispatch.depth = "auto"`."""

    def __init__(self, tuning: DepthTuning | None = None) -> None:
        self.tuning = tuning or DepthTuning()
        self._start = min(self.tuning.start_depth, self.tuning.max_depth)
        self._warmup, self._every = self.tuning.warmup, self.tuning.every  # read per result
        self._first_every = max(2, self.tuning.every // 2)  # until the first round trip is known
        self._ramp_top = min(self.tuning.free_depth, self.tuning.max_depth)  # the ramp raises to at most this
        self._idle_min_s, self._wait_fraction = self.tuning.idle_min_s, self.tuning.wait_fraction
        self.ranks: dict[Rank, RankDepth] = {}

    def depth(self, rank: Rank) -> int:
        r = self.ranks.get(rank)
        return self._start if r is None else r.depth

    def _rank(self, rank: Rank) -> RankDepth:
        r = self.ranks.get(rank)
        if r is None:
            r = self.ranks[rank] = RankDepth(self._start, history=[self._start])
        return r

    def short(self, rank: Rank) -> None:
        """The coordinator had no work to fill the rank to its depth: this period's waiting (if
        any) says nothing about the round trip."""
        r = self.ranks.get(rank)
        if r is not None:
            r.ran_short = True

    def observe(self, rank: Rank, sent_at: float, now: float, wall_s: float) -> int | None:
        """One committed result of `rank`: its WORK was sent at `sent_at`, the result is handled
        at `now` (same clock), the task took `wall_s`. Returns the rank's new depth if it changed."""
        r = self.ranks.get(rank) or self._rank(rank)
        last, r.last_result = r.last_result, now
        if wall_s < 0.0:
            wall_s = 0.0
        # The ramp, until the round trip is known, on the results whose WORK found the worker idle:
        # sent after the previous result, or with a gap beyond the overhead (a period's test).
        if r.round_trip_s is None and r.depth < self._ramp_top and (
                last is None or sent_at >= last or now - wall_s - last
                > r.overhead_s + max(self._idle_min_s, self._wait_fraction * (wall_s + r.overhead_s))):
            new = self._ramp(r, sent_at, now, wall_s)
            if new is not None:  # a jump: the next period measures the new depth (this result is not in it)
                r.results += r.results < self._warmup
                return new
        if r.period_start is None or r.results < self._warmup:
            r.results += 1
            r.period_start = now
            r.ran_short = False
            return None
        r.n += 1
        r.wall_sum += wall_s
        beyond = now - wall_s
        trip = beyond - sent_at if beyond > sent_at else 0.0
        if last is not None and sent_at < last:
            r.gaps.append((beyond - last, trip))  # pipelined: queued, unless the gap is long
        else:
            r.waits.append(trip)  # sent after the previous result: the worker was idle
        if r.n >= (self._every if r.round_trip_s is not None else self._first_every):
            return self._end_period(r, now)
        return None

    def _ramp(self, r: RankDepth, sent_at: float, now: float, wall_s: float) -> int | None:
        """Before the round trip is known, a result whose WORK found the worker idle: its trip is
        a round trip; enough of them asking for far more depth make it jump (the module's doc)."""
        tu = self.tuning
        trips = r.ramp_trips
        trips.append(max(now - wall_s - sent_at, 0.0))
        del trips[:-tu.ramp_samples]
        if len(trips) < tu.ramp_samples:
            return None
        trip = min(trips)
        # The task time: the estimate, else the current period's mean, else this task's (the
        # rank's first task, which may carry its start-up, is in neither: it is the warm-up's).
        task = r.task_s if r.task_s is not None else r.wall_sum / r.n if r.n else wall_s
        per_task = task + r.overhead_s
        need = math.inf if per_task <= 0 else 1.0 + trip / per_task
        if need < tu.ramp_factor * r.depth:
            return None  # short by little: the periods judge it
        want = min(self._clamp(need * tu.margin), self._ramp_top)
        if r.ceiling is not None:
            want = min(want, r.ceiling)
        if want <= r.depth:
            return None
        r.round_trip_s = trip
        r.ramp_trips = []
        r.period_start, r.n, r.wall_sum, r.gaps, r.waits, r.ran_short = now, 0, 0.0, [], [], False
        r.starved.clear()
        return self._set(r, want)

    def needed(self, rank: Rank) -> float | None:
        """Dispatches in flight the rank needs to never wait (Little's law), or None (unmeasured)."""
        r = self.ranks.get(rank)
        return None if r is None else self._needed(r)

    def _needed(self, r: RankDepth) -> float | None:
        if r.round_trip_s is None or r.task_s is None:
            return None
        per_task = r.task_s + r.overhead_s
        if per_task <= 0:
            return math.inf
        return 1.0 + r.round_trip_s / per_task

    def _end_period(self, r: RankDepth, now: float) -> int | None:
        tu = self.tuning
        a = tu.smoothing
        assert r.period_start is not None  # `observe` began the period
        per_result = (now - r.period_start) / r.n
        mean_wall = r.wall_sum / r.n
        off = 0 if r.task_s is None else (mean_wall > r.task_s * tu.step) - (mean_wall < r.task_s / tu.step)
        if r.task_s is None or (off and off == r.task_off):
            r.task_s = mean_wall  # the task time changed: two periods in a row far off
            r.ceiling = None
        else:
            r.task_s += a * (mean_wall - r.task_s)
        r.task_off = off
        if len(r.gaps) * 4 >= r.n:
            r.overhead_s = max(_low_median([g for g, _ in r.gaps]), 0.0)
        per_task = mean_wall + r.overhead_s  # this period's, not the running estimate
        if per_result > per_task * (1 + tu.idle_fraction) + tu.idle_min_s and not r.ran_short:
            # Starved. The round trip is what the WORK the worker waited for took, less the task.
            cut = r.overhead_s + max(tu.idle_min_s, tu.wait_fraction * per_task)
            waits = r.waits + [trip for gap, trip in r.gaps if gap > cut]
            r.starved.append(_low_median(waits) if waits else max(r.depth * per_result - per_task, 0.0))
            del r.starved[:-tu.starved_after]
            if len(r.starved) >= tu.starved_after:
                trip = min(r.starved)
                r.round_trip_s = trip if r.round_trip_s is None else r.round_trip_s + a * (trip - r.round_trip_s)
        elif not r.ran_short:
            r.starved.clear()
        ran_short = r.ran_short
        r.period_start, r.n, r.wall_sum, r.gaps, r.waits, r.ran_short = now, 0, 0.0, [], [], False
        if r.probe is not None and not ran_short:
            before, predicted = r.probe
            r.probe = None
            if per_result > r.last_per_result * (1 - tu.pay_share * (1 - predicted)):
                r.ceiling = before  # it did not pay: back, and no higher until the task time changes
                return self._set(r, before)
        r.last_per_result = per_result
        need = self._needed(r)
        if need is None:
            return None
        want = self._clamp(need * tu.margin)
        if r.ceiling is not None:
            want = min(want, r.ceiling)
        if want > r.depth:
            r.lower_streak = 0
            if want > tu.free_depth:
                predicted = self._predict(r, want) / self._predict(r, r.depth)
                if predicted < 0.96:  # a gain worth checking
                    r.probe = (r.depth, predicted)
            return self._set(r, want)
        if self._clamp(need * tu.lower_margin) < r.depth:
            r.lower_streak += 1
            if r.lower_streak >= tu.lower_after:
                r.lower_streak = 0
                return self._set(r, want)
        else:
            r.lower_streak = 0
        return None

    @staticmethod
    def _predict(r: RankDepth, depth: int) -> float:
        """Little's law: the time per result at `depth` (the worker either busy or waiting once a cycle)."""
        assert r.task_s is not None and r.round_trip_s is not None  # measured: `_needed(r)` was not None
        per_task = r.task_s + r.overhead_s
        return max(per_task, (per_task + r.round_trip_s) / depth)

    def _clamp(self, x: float) -> int:
        if math.isinf(x):
            return self.tuning.max_depth
        return max(1, min(self.tuning.max_depth, math.ceil(x - 1e-9)))

    @staticmethod
    def _set(r: RankDepth, depth: int) -> int | None:
        if depth == r.depth:
            return None
        r.depth = depth
        r.changes += 1
        r.history.append(depth)
        return depth

    def explain(self, rank: Rank) -> dict[str, float | None]:
        """What the rank's depth rests on, in ms (for the `dispatch.depth_changed` log event)."""
        r = self.ranks.get(rank)
        if r is None:
            return {}

        def ms(x: float | None) -> float | None:
            return None if x is None else round(x * 1000, 3)

        return {"round_trip_ms": ms(r.round_trip_s), "task_ms": ms(r.task_s), "overhead_ms": ms(r.overhead_s)}

    def stat_items(self, ranks: list[Rank]) -> dict[str, int]:
        """fuzzer_stats rows: each rank's current depth and how often depths changed."""
        items: dict[str, int] = {f"depth_rank_{rank}": self.depth(rank) for rank in ranks}
        items["depth_changes"] = sum(r.changes for r in self.ranks.values())
        return items


def _low_median(xs: list[float]) -> float:
    """The lower median: when a worker waits once a cycle at depth 2, half its gaps are waits."""
    return sorted(xs)[(len(xs) - 1) // 2]
