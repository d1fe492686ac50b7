"""Loop extension: follows, inside one task, a loop that must run longer than the input lets it.

Some inputs only progress through a loop: a LEB128 varint needs one more continuation bit and
one more byte per 7 bits of value, a count-prefixed list one more element per count. Their
intermediate inputs bring no new coverage (the same edges, hit-count buckets saturated by
other inputs), so a coverage-guided generational search drops them, and the input that finally
matters is never built. Two triggers, each followed for at most ``loop_extensions`` symbolic
runs per task, all of them together within ``symbolic_timeout_s``:

- ``pursue``: branch ``i`` cannot be negated, not even without the path prefix (no value of the
  bytes its condition reads satisfies it, e.g. ``(b0 & 0x7F) == 300000``): those bytes are too
  few, which the earlier branches on them decided (a loop exit). The latest such branch is
  negated (the loop runs once more), the input grown while the run ends on a test of its
  length before the branch's site, and the site met again is negated; repeated while the
  condition reads more bytes each time (else ``loop_pursuits_stalled``), until it can be
  negated or the budget ends. Only that final child is reported (``loop_pursuits_found``).
- ``grow_on``: a child grown past a loop's test on the input length (``pos < len(data)``)
  ends on the same test again, one iteration later (its last branch: nothing else was decided
  after the input ran out): it is grown again, by 1, 2, 4, ... 128 bytes, until the test lets it
  through; that child is reported as well (``loop_growths_found``). A loop that reads the
  input to its end and then goes on does not end on its test, and is not grown.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import z3

from symfence.worker.concolic.execution import Run
from symfence.worker.concolic.recorder import LENGTH_BIT, Recorder
from symfence.worker.engine_api import ExitKind

if TYPE_CHECKING:
    from symfence.worker.concolic.engine import _Search

_RELATED_TRIES = 4  # earlier branches on the condition's bytes tried per step
_GROWTHS = 8  # growths in a row past one length test (by 1, 2, ... 128 bytes: 255 in all)


class LoopExtension:
    """The loop-extension budget of one task and the two ways of spending it."""

    def __init__(self, search: _Search) -> None:
        self.search = search
        self.runs_left = search.options.loop_extensions
        self.deadline: float | None = None  # set by the first extension run

    def out_of_reach(self, rec: Recorder, index: int) -> bool:
        """Whether the other side of branch ``index``, a condition on input bytes, is
        unsatisfiable on its own (one query, counted as ``loop_queries``, ``loop_unsat``, ...)."""
        if self.runs_left <= 0 or not rec.deps[index] & ~LENGTH_BIT:
            return False
        solver = z3.SimpleSolver()
        solver.set("timeout", self.search.options.solver_timeout_ms)
        solver.add(z3.Not(rec.conds[index]) if rec.taken[index] else rec.conds[index])
        result, _ = self.search._check(solver, [], "loop_")
        return result == z3.unsat

    def _run(self, data: bytes, bound: int) -> Run | None:
        """A symbolic run of ``data`` within the budget, or None when it is spent or the run
        did not complete (a crash or hang of ``data`` is reported with ``bound``)."""
        if self.runs_left <= 0:
            return None
        now = time.perf_counter()
        if self.deadline is None:
            self.deadline = now + self.search.options.symbolic_timeout_s
        if now >= self.deadline:
            self.runs_left = 0
            return None
        self.runs_left -= 1
        self.search.stats["loop_extension_runs"] += 1
        run = self.search._execute(data, symbolic=True, timeout_s=self.deadline - now)
        if run.kind is ExitKind.OK:
            return run
        self.search._report(data, bound)  # confirmed (or dropped) on its plain replay
        return None

    def _flip(self, run: Run, data: bytes, index: int, min_length: int = 0) -> bytes | None:
        from symfence.worker.concolic.engine import _Prefix  # the engine imports this module

        assert run.variables is not None
        prefix = _Prefix(run.recorder)
        prefix.advance(index)
        child, _ = self.search._solve(prefix, index, run.variables, data, None, min_length)
        return child if child != data else None

    def _grow_until(self, run: Run, data: bytes, after: int, site: int | None,
                    produced: set[bytes]) -> tuple[Run, bytes] | None:
        """Grow ``data`` while the run ends on a test of the input length (its last branch,
        after branch ``after``): until ``site`` is met, or with ``site`` None until the run no
        longer ends on the same test (by 1, 2, 4, ... bytes). The run and input, or None."""
        step, stopped_by = 1, None
        for _ in range(_GROWTHS):
            rec = run.recorder
            if site is not None and site in rec.sites[after + 1:]:
                return run, data
            last = len(rec.sites) - 1
            stopped = last > after and (last in rec.on_length or last in rec.ends)
            if site is None and stopped_by is not None and (
                    not stopped or (rec.sites[last], rec.taken[last]) != stopped_by):
                return run, data  # through the test that stopped it
            if not stopped:
                return None
            step = step * 2 if stopped_by is not None else 1
            stopped_by = (rec.sites[last], rec.taken[last])
            child = self._flip(run, data, last, len(data) + step)
            if child is None or child in produced:
                return None
            produced.add(child)
            grown = self._run(child, last)
            if grown is None:
                return None
            run, data = grown, child
        return None

    def pursue(self, run: Run, data: bytes, index: int) -> None:
        """Negate branch ``index`` of ``run`` (out of reach: see the module docstring)."""
        search = self.search
        site, want = run.recorder.sites[index], not run.recorder.taken[index]
        produced = {data}
        search.stats["loop_pursuits"] += 1
        while self.runs_left > 0:
            rec = run.recorder
            reads = rec.deps[index] & ~LENGTH_BIT
            child, tries, flipped = None, 0, -1
            for j in range(index - 1, -1, -1):
                if j in rec.on_length or j in rec.ends or not rec.deps[j] & reads:
                    continue
                child, tries = self._flip(run, data, j), tries + 1
                if child is not None and child not in produced:
                    flipped = j
                    break
                child = None
                if tries >= _RELATED_TRIES:
                    break
            if child is None:
                return
            produced.add(child)
            next_run = self._run(child, flipped + 1)
            if next_run is None:
                return
            reached = self._grow_until(next_run, child, flipped, site, produced)
            if reached is None:
                return
            run, data = reached
            rec = run.recorder
            index = next(k for k in range(flipped + 1, len(rec.sites)) if rec.sites[k] == site)
            found = data if rec.taken[index] == want else self._flip(run, data, index)
            if found is None:
                if (rec.deps[index] & ~LENGTH_BIT).bit_count() <= reads.bit_count():
                    search.stats["loop_pursuits_stalled"] += 1
                    return  # the condition reads no more bytes than before: no progress
                continue
            search.stats["loop_pursuits_found"] += 1
            search._replay(found, index, site, want, False)
            return

    def grow_on(self, replayed: Run, child: bytes, index: int, site: int, taken: bool) -> None:
        """A child grown past the length test ``index`` at ``site``: grow it on if it stops there again."""
        rec = replayed.recorder
        if len(rec.sites) <= index + 1 or (rec.sites[-1], rec.taken[-1]) != (site, taken):
            return  # it does not end on that test again
        run = self._run(child, index + 1)
        if run is None:
            return
        self.search.stats["loop_growths"] += 1
        reached = self._grow_until(run, child, index, None, {child})
        if reached is None or reached[1] == child:
            return
        grown_run, grown = reached
        last = max((k for k, s in enumerate(grown_run.recorder.sites) if s == site), default=None)
        if last is None:  # grown, it went another way before that test (dpkt's MPLS labels): nothing to flip
            self.search.stats["loop_growths_elsewhere"] += 1
            return
        self.search.stats["loop_growths_found"] += 1
        self.search._replay(grown, last, site, not taken, False)
