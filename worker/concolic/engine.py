"""Generational search (SAGE): one task = run the input, negate each branch past the bound, solve, replay.

For a task ``(data, bound)`` the engine
1. runs ``data`` concretely (trace mode): its status and coverage are the task's own; a crash or
   hang ends the task there (no children from an input that does not complete);
2. runs ``data`` symbolically, recording the path constraints ``p_0 .. p_n`` (a symbolic run
   that times out still yields a valid prefix);
3. for each branch ``i >= bound`` solves ``p_0 .. p_{i-1}, not p_i`` restricted to the
   constraints that share variables with ``p_i`` (independence slicing), each query with the
   solver time-out; bytes the query does not mention keep the parent's value; if the input
   length is involved the solver first tries to keep it, then allows ``|len - n| <= 1, 4,
   16, ...`` up to ``max_input_len`` (new bytes are zero);
   plus, with no solver, the input with a piece replaced by the constant of another length
   it was compared with (``Recorder.splice``, as input-to-state replacement does);
4. replays every child concretely (its trace, crash or hang; whether it really took the flipped
   branch - a divergence otherwise) and reports it with child bound ``i + 1``;
5. replays every crash and hang (of a child or of the input itself) on the plain target in a
   fresh interpreter (``replay``): one that does not reproduce there is an artefact of the
   proxies, counted as ``false_findings`` (a crash) or ``slow_runs_not_hangs`` (a hang: the run on
   proxies is much slower than the plain one) and dropped, never reported as a finding.
``Outcome.stats`` carries the counters (``branches``, ``concretised_<kind>``, ``sat``/``unsat``/
``unknown``, ``divergences``, ``false_findings``, ...) and, when the symbolic run recorded no
branch at all, ``left_via.<function>``: where the input most likely left Python (``diagnose``).
A per-engine memo of ``(prefix hash, site, direction)`` skips queries another work item already
solved; a retry of the same ``work_id`` is never skipped, so a lost result can be recomputed.
Each task runs in a z3 context of its own (``z3scope``): the solver's pick among many models
depends on the context's history, so a shared one made a task's search depend on the tasks the
process ran before. What a task sees of earlier ones: the memo above (queries skipped), the
sites whose comparison constants were harvested already (``dictionary``: fewer tokens) and
the target's own module state.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from dataclasses import replace
from typing import Mapping, Protocol

import z3

from symfence.worker.concolic import cut, enums
from symfence.worker.concolic.dictionary import comparison_constants
from symfence.protocol.rules import LEFT_VIA, NOT_INSTRUMENTED
from symfence.worker.concolic.diagnose import left_via, stats_key
from symfence.worker.concolic.execution import Run, execute
from symfence.worker.concolic.instrument import (
    FALLBACKS,
    LATE_PLAIN,
    Target,
    TargetLoadError,
    load_target,
    parse_module_list,
)
from symfence.worker.concolic.loops import LoopExtension
from symfence.worker.concolic.models import InputVariables
from symfence.worker.concolic.options import EngineOptions
from symfence.worker.concolic.replay import Verdict, replay_plain
from symfence.worker.concolic.recorder import LENGTH_BIT, Pin, Recorder
from symfence.worker.concolic.z3scope import task_context
from symfence.worker.engine_api import CandidateOut, ExitKind, Outcome, Task

_MEMO_LIMIT = 1 << 20
_MAX_KINDS = 24  # concretisation kinds reported per task (the rest add up in concretised_other)
# A query with a regular-expression membership on its path (z3's string theory, ``relib``)
# gets this many times solver_timeout_ms: z3 decides them in 0.05-0.5 s, bit-vectors in ms.
_STRING_QUERY_FACTOR = 5
# z3 turns a regex non-membership into a complement, and complementing a large pattern (or
# intersecting a lexer's hundreds of them) runs in its rewriter, which ignores the query's
# time-out (seen: sqlparse, minutes in seq_rewriter::mk_re_complement). So no query holds one:
# a regex that did not match is left off the path of later queries (a child that matches it
# diverges), one that matched is never negated (the search asks for matches, not for their
# failure), and at most this many matches stay on a path: 0, as intersecting two memberships
# on one text also ran past the time-out (email_validator, seq_rewriter::mk_regex_inter_normalize);
# bytes a query does not mention keep the parent's values, so a match mostly survives.
_MAX_STRING_PREFIX = 0


class Progress(Protocol):
    """Observer of a task in flight (the child process streams these to its parent)."""

    def executing(self, data: bytes, bound: int, is_input: bool) -> None: ...

    def input_done(self, trace: Mapping[int, int]) -> None: ...

    def candidate(self, candidate: CandidateOut) -> None: ...

    def confirming(self) -> None: ...


class NoProgress:
    """A Progress that ignores everything."""

    def executing(self, data: bytes, bound: int, is_input: bool) -> None:
        pass

    def input_done(self, trace: Mapping[int, int]) -> None:
        pass

    def candidate(self, candidate: CandidateOut) -> None:
        pass

    def confirming(self) -> None:
        pass


class _Groups:
    """Path constraints partitioned by shared variables (masks), for independence slicing."""

    def __init__(self) -> None:
        self._groups: list[tuple[int, list[z3.BoolRef]]] = []

    def add(self, constraint: z3.BoolRef, mask: int) -> None:
        joined: list[tuple[int, list[z3.BoolRef]]] = []
        rest: list[tuple[int, list[z3.BoolRef]]] = []
        for group in self._groups:
            (joined if group[0] & mask else rest).append(group)
        if not joined:
            rest.append((mask, [constraint]))
        else:
            joined.sort(key=lambda g: len(g[1]), reverse=True)
            merged_mask, merged = joined[0][0] | mask, joined[0][1]
            for other_mask, other in joined[1:]:
                merged_mask |= other_mask
                merged.extend(other)
            merged.append(constraint)
            rest.append((merged_mask, merged))
        self._groups = rest

    def related(self, mask: int) -> tuple[int, list[z3.BoolRef]]:
        """The union mask and the constraints of every group sharing a variable with ``mask``."""
        constraints: list[z3.BoolRef] = []
        for group_mask, group in self._groups:
            if group_mask & mask:
                mask |= group_mask
                constraints.extend(group)
        return mask, constraints


class _Prefix:
    """The path constraints of a run before branch ``i`` (``advance(i)``), for ``_solve``.

    ``groups``: the branches and pins by shared variables; ``loose``: the tests on the input
    length alone (``rec.on_length``), which ``_solve`` may drop. An end-of-input branch (``len
    > n`` false) is kept out of both: later conditions that need a longer input (a slice
    compared past the end, the line a scan would read) carry their own length terms."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.groups = _Groups()
        self.loose = _Groups()
        self._next_branch = 0
        self._next_pin = 0
        self.strings = 0  # regex memberships on the path so far
        self.strings_dropped = 0

    def advance(self, index: int) -> list[Pin]:
        """Add everything before branch ``index``; returns the pins added."""
        rec, pins = self.rec, self.rec.pins
        added: list[Pin] = []
        while True:
            while self._next_pin < len(pins) and pins[self._next_pin].position <= self._next_branch:
                pin = pins[self._next_pin]
                self.groups.add(pin.constraint, pin.deps)
                added.append(pin)
                self._next_pin += 1
            if self._next_branch >= index:
                return added
            i = self._next_branch
            cond, mask = rec.conds[i], rec.deps[i]
            path = cond if rec.taken[i] else z3.Not(cond)
            if i in rec.on_length:
                self.loose.add(path, mask)
            elif i in rec.strings and (not rec.taken[i] or self.strings >= _MAX_STRING_PREFIX):
                self.strings_dropped += 1  # see _MAX_STRING_PREFIX
            elif i not in rec.ends:
                self.groups.add(path, mask)
                self.strings += i in rec.strings
            self._next_branch += 1


def _mask_indices(mask: int) -> list[int]:
    """Byte indices named by a dependency mask (bit j + 1 is byte j)."""
    indices = []
    mask >>= 1
    index = 0
    while mask:
        if mask & 1:
            indices.append(index)
        mask >>= 1
        index += 1
    return indices


class ConcolicEngine:
    """Runs concolic tasks in this process; keeps the solved-query memo between tasks."""

    def __init__(self) -> None:
        self._memo: dict[tuple[int, int, bool], str] = {}
        enums.install()  # Kind(data[0]) of an Enum: a table lookup (worker/concolic/enums.py)

    def run_task(self, task: Task, progress: Progress | None = None) -> Outcome:
        """Run one task to completion. Never raises: engine failures are ERROR outcomes."""
        wall0, cpu0 = time.perf_counter(), time.process_time()
        cut.clear()
        try:
            options = EngineOptions.from_mapping(task.options)
            target = load_target(task.target, parse_module_list(options.instrument),
                                 options.instrument_imports)
        except (ValueError, TargetLoadError) as exc:  # the task's fault: a short message
            outcome = Outcome(ExitKind.ERROR, error=f"{type(exc).__name__}: {exc}")
        else:
            try:
                with task_context():  # the solver's choices depend on this task alone
                    outcome = _Search(self._memo, task, options, target, progress or NoProgress()).run()
            except Exception:  # noqa: BLE001 - an engine failure is data, never a dead worker
                outcome = Outcome(ExitKind.ERROR, error=traceback.format_exc())
        if len(self._memo) > _MEMO_LIMIT:
            self._memo.clear()
        return replace(outcome, wall_s=time.perf_counter() - wall0,
                       cpu_s=time.process_time() - cpu0)


class _Search:
    """The state of one task's generational search."""

    def __init__(self, memo: dict[tuple[int, int, bool], str], task: Task,
                 options: EngineOptions, target: Target, progress: Progress):
        self.memo = memo
        self.task = task
        self.options = options
        self.target = target
        self.progress = progress
        self.stats: Counter[str] = Counter()
        self.solver_s = 0.0
        self.execs = 0
        self.candidates: list[CandidateOut] = []
        self.tokens: tuple[bytes, ...] = ()  # comparison constants (the fuzzer's dictionary)
        self.pending: list[CandidateOut] = []  # crashes and hangs awaiting the plain replay
        self.false_findings: list[tuple[bytes, ExitKind, str]] = []
        self.loops = LoopExtension(self)  # loops that must run longer than the input lets them
        self.query_ms = options.solver_timeout_ms  # this query's time-out (``_solve`` sets it)
        self.prefix: _Prefix | None = None  # the path of the run being expanded
        self.resume_at: int | None = None  # cut short: the first branch not tried (Outcome.resume_at)
        self.branch = task.bound  # the branch `_expand` is at

    def _execute(self, data: bytes, *, symbolic: bool, timeout_s: float | None = None) -> Run:
        opts = self.options
        self.execs += 1
        timeout = opts.symbolic_timeout_s if symbolic else opts.exec_timeout_s
        if timeout_s is not None:
            timeout = min(timeout, timeout_s)
        return execute(self.target, data, symbolic=symbolic, timeout_s=timeout,
                       max_branches=opts.max_branches, pin_concretised=opts.pin_concretised)

    def _outcome(self, status: ExitKind, trace: Mapping[int, int], error: str = "") -> Outcome:
        return Outcome(status=status, trace=trace, candidates=tuple(self.candidates),
                       solver_s=self.solver_s, execs=self.execs, error=error,
                       stats=dict(self.stats), tokens=self.tokens, resume_at=self.resume_at)

    def run(self) -> Outcome:
        task = self.task
        self.progress.executing(task.data, task.bound, True)
        concrete = self._execute(task.data, symbolic=False)
        trace = concrete.trace
        if concrete.kind is not ExitKind.OK:
            self.progress.confirming()
            confirmed = self._confirm(task.data, concrete.kind, concrete.detail)
            if confirmed is None:  # the proxies' doing: no finding, and no children either
                return self._outcome(ExitKind.OK, {})
            return self._outcome(concrete.kind, trace, confirmed)
        self.progress.input_done(trace)
        symbolic = self._execute(task.data, symbolic=True)
        if symbolic.kind is ExitKind.HANG:
            self.stats["symbolic_timeouts"] += 1
        elif symbolic.kind is ExitKind.CRASH:
            self.stats["symbolic_crashes"] += 1
        if symbolic.recorder.sites != concrete.recorder.sites[: len(symbolic.recorder.sites)]:
            self.stats["path_mismatches"] += 1
        self._count_run(symbolic)
        if task.target in FALLBACKS and self.options.instrument_imports:
            self.stats["imports_not_instrumented"] += 1  # the library failed to import rewritten ...
            self.stats[stats_key(NOT_INSTRUMENTED, FALLBACKS[task.target][0])] += 1  # ... and why
        if LATE_PLAIN:  # library modules imported during the runs that failed to import rewritten
            self.stats["late_imports_plain"] += len(LATE_PLAIN)
            LATE_PLAIN.clear()
        if not symbolic.recorder.sites:
            self.stats[stats_key(LEFT_VIA, left_via(self.target, task.data, symbolic.recorder))] += 1
        if cut.requested():
            self._cut_at(task.bound)
        else:
            try:
                self._expand(symbolic)
            except z3.Z3Exception as exc:
                # z3 refuses any call in a context interrupted (cut.py) after its query ended (the
                # interrupt raced the query's end): answer now and hand back the rest; the next
                # task has a context of its own (z3scope.py).
                if "canceled" not in str(exc):
                    raise
                self.stats["z3_canceled"] += 1
                self._cut_at(self.branch)
        if self.prefix is not None and self.prefix.strings_dropped:
            self.stats["regex_prefix_dropped"] += self.prefix.strings_dropped
        self._confirm_pending()
        return self._outcome(ExitKind.OK, trace)

    def _cut_at(self, branch: int) -> None:
        """Answer now (a re-run waits on this worker, or the campaign is ending: cut.py), and
        hand back the branches not tried: the campaign continues the input from there."""
        self.stats["cut_short"] += 1
        self.resume_at = max(branch, self.task.bound)

    def _count_run(self, run: Run) -> None:
        rec = run.recorder
        self.stats["branches"] += len(rec.sites)
        self.stats["implicit_branches"] += rec.implicit
        self.stats["assumptions"] += len(rec.pins)
        self.stats["concretisations"] += sum(rec.concretisations.values())
        kinds = rec.concretisations.most_common()
        for kind, count in kinds[:_MAX_KINDS]:
            self.stats[stats_key("concretised_", kind)] += count
        other = sum(count for _, count in kinds[_MAX_KINDS:])
        if other:
            self.stats["concretised_other"] += other
        if rec.capped:
            self.stats["branch_cap_hits"] += 1

    def _confirm(self, data: bytes, kind: ExitKind, detail: str) -> str | None:
        """The plain replay's detail if the finding reproduces without the engine, else None (counted)."""
        if not self.options.confirm_findings:
            return detail
        replay = replay_plain(self.task.target, data, self.options.exec_timeout_s)
        if replay.verdict is Verdict.UNKNOWN:
            self.stats["confirm_errors"] += 1
            return detail
        if kind is ExitKind.CRASH and replay.verdict is Verdict.CRASHED:
            return replay.detail or detail
        if kind is ExitKind.HANG and replay.verdict is Verdict.HUNG:
            return replay.detail or detail  # the plain run's stack at the deadline: the hang's identity
        if replay.verdict is Verdict.CRASHED and kind is ExitKind.HANG:
            self.stats["confirm_kind_changed"] += 1
            return None
        if kind is ExitKind.HANG:  # the run on proxies was slow, the plain one is not: the engine's cost
            self.stats["slow_runs_not_hangs"] += 1  # (pyelftools, exifread), not a wrong model: no warning
            return None
        self.stats["false_findings"] += 1
        self.false_findings.append((data, kind, detail))
        return None

    def _confirm_pending(self) -> None:
        if not self.pending:
            return
        self.progress.confirming()
        for candidate in self.pending:
            detail = self._confirm(candidate.data, candidate.kind, candidate.detail)
            if detail is None:
                continue
            confirmed = replace(candidate, detail=detail)
            self.candidates.append(confirmed)
            self.progress.candidate(confirmed)
        self.pending = []

    def _expand(self, run: Run) -> None:
        rec, opts, task = run.recorder, self.options, self.task
        self.tokens = comparison_constants(rec.conds, rec.sites)
        assert run.variables is not None
        prefix = self.prefix = _Prefix(rec)
        prefix_hash = hash(("symfence", task.target))
        produced = {task.data}
        self._splice(rec, produced)  # first: no solver, and aimed at a comparison
        for i, (site, taken) in enumerate(zip(rec.sites, rec.taken)):
            self.branch = i
            if cut.requested():
                self._cut_at(i)
                return
            for pin in prefix.advance(i):
                prefix_hash = hash((prefix_hash, "pin", pin.value))
            # the input may always grow (memo: once per prefix), at the end or under a loop's
            # length test (``rec.on_length``)
            if (i >= task.bound or i in rec.ends or i in rec.on_length) and not (
                    taken and i in rec.strings):  # a regex that matched: see _MAX_STRING_PREFIX
                if len(self.candidates) + len(self.pending) >= opts.max_candidates:
                    self.stats["candidate_cap_hits"] += 1
                    return
                if self.solver_s >= opts.solver_budget_s:
                    self.stats["solver_budget_stops"] += 1
                    return
                key = (prefix_hash, site, taken)
                solved_by = self.memo.get(key)
                if solved_by is not None and solved_by != task.work_id and i not in rec.ends:
                    self.stats["memo_skips"] += 1
                else:
                    # under the bound a length test is negated only to grow the input (a
                    # shorter one is what the search at a lower bound already asked for)
                    longer = len(task.data) + 1 if i < task.bound and i not in rec.ends else 0
                    child, result = self._solve(prefix, i, run.variables, task.data, key, longer)
                    if result == z3.unknown and cut.requested():  # the cut, not the solver, said
                        self._cut_at(i)  # unknown: this branch was not tried, it is handed back too
                        return
                    if child is not None and child not in produced:
                        produced.add(child)
                        grows = i in rec.ends
                        replayed = self._replay(child, i, site, not taken, grows)
                        if i in rec.on_length and len(child) > len(task.data):
                            self.loops.grow_on(replayed, child, i, site, taken)
                    elif child is not None:
                        self.stats["duplicates"] += 1
                    elif result == z3.unsat and self.loops.out_of_reach(rec, i):
                        self.loops.pursue(run, task.data, i)
            prefix_hash = hash((prefix_hash, site, taken, rec.states.get(i, 0)))

    def _splice(self, rec: Recorder, produced: set[bytes]) -> None:
        """Children with a piece of the input replaced by the constant of another length it was
        compared with (``Recorder.splice``: a JSON key ``"x"`` against ``"cmd"``), or with a
        compared constant inserted where an empty piece was tested (``Recorder.insertion``: the
        key ``""``), no solver involved; at most a quarter of ``max_candidates``, each child
        once per engine (memo)."""
        task, opts = self.task, self.options
        used = len(self.candidates) + len(self.pending)
        budget = min(max(1, opts.max_candidates // 4), opts.max_candidates - used)
        edits = [(start, end, constant, position)
                 for (start, end, constant), position in rec.splices.items()]
        edits += [(offset, offset, constant, position)
                  for offset, position in rec.insertions.items() for constant in rec.constants]
        for start, end, constant, position in edits:
            if budget <= 0:
                self.stats["splice_cap_hits"] += 1
                return
            child = task.data[:start] + constant + task.data[end:]
            if len(child) > opts.max_input_len or child in produced:
                continue
            key = (hash(("splice", task.target, child)), -1, True)
            solved_by = self.memo.get(key)
            if solved_by is not None and solved_by != task.work_id:
                self.stats["memo_skips"] += 1
                continue
            self.memo[key] = task.work_id
            produced.add(child)
            budget -= 1
            self.stats["splices" if start < end else "insertions"] += 1
            # the path up to the comparison is mostly the parent's (the piece scans longer)
            self._report(child, min(task.bound, position))

    def _beyond_limit(self, solver: z3.Solver, result: z3.CheckSatResult, length: z3.ArithRef, limit: int) -> None:
        """A branch with no input up to `max_input_len` (unsat): count it if a longer one would
        take it (pycdlib's descriptors start at 32 KiB: 8 such queries and no word about why)."""
        if result == z3.unsat and self._check(solver, [length > limit])[0] == z3.sat:
            self.stats["beyond_max_input_len"] += 1

    def _check(self, solver: z3.Solver, extra: list[z3.BoolRef], counters: str = "",
               ) -> tuple[z3.CheckSatResult, z3.ModelRef | None]:
        """One query (the solver's constraints plus ``extra``): result and model if sat.
        Counted as ``<counters>queries`` and ``<counters>sat``/``unsat``/``unknown``. Once the
        task is asked to end (``cut``), every query is unknown at once: the search unwinds."""
        if cut.requested():
            return z3.unknown, None
        solver.push()
        solver.add(*extra)
        start = time.perf_counter()
        overruns = cut.overruns()
        cut.arm(solver.ctx, self.query_ms / 1000)  # z3 may overrun its time-out: interrupted then
        try:
            result = solver.check()
            model = solver.model() if result == z3.sat else None
        except z3.Z3Exception:
            result, model = z3.unknown, None
        finally:
            cut.disarm()
        if cut.overruns() != overruns:
            self.stats["solver_overruns"] += 1
        self.solver_s += time.perf_counter() - start
        solver.pop()
        self.stats[counters + "queries"] += 1
        self.stats[counters + str(result)] += 1  # "sat", "unsat" or "unknown"
        return result, model

    def _solve(self, prefix: _Prefix, index: int, variables: InputVariables, parent: bytes,
               key: tuple[int, int, bool] | None, min_length: int = 0,
               ) -> tuple[bytes | None, z3.CheckSatResult]:
        """A child of ``parent`` taking the other side of branch ``index`` after the prefix
        (``prefix`` advanced to ``index``), or None (unsat/unknown); and the solver's result.

        The prefix's tests on the input length alone (``loose``: a read loop's ``pos < len``)
        are kept if that is satisfiable, else dropped (the input may then grow past them).
        ``min_length``: the child is at least that long. ``key``: the memo entry to set."""
        rec = prefix.rec
        cond, mask = rec.conds[index], rec.deps[index]
        flipped = z3.Not(cond) if rec.taken[index] else cond
        strings = bool(rec.strings) and min(rec.strings) <= index
        self.query_ms = self.options.solver_timeout_ms * (_STRING_QUERY_FACTOR if strings else 1)
        strict_mask, strict = prefix.groups.related(mask)
        loose_mask, relaxed = prefix.loose.related(strict_mask)
        if relaxed:
            mask, constraints = strict_mask | loose_mask, strict + relaxed
            result, model, new_length = self._attempt(constraints, flipped, mask, variables,
                                                      len(parent), min_length)
            if model is None and result == z3.unsat:
                self.stats["length_tests_dropped"] += 1
                mask = strict_mask
                result, model, new_length = self._attempt(strict, flipped, mask, variables,
                                                          len(parent), min_length)
        else:
            mask = strict_mask
            result, model, new_length = self._attempt(strict, flipped, mask, variables,
                                                      len(parent), min_length)
        if result != z3.unknown and key is not None:
            self.memo[key] = self.task.work_id
        if model is None:
            return None, result
        child = bytearray(parent[:new_length])
        child.extend(bytes(new_length - len(child)))
        for index in _mask_indices(mask):
            if index < new_length:
                var = (variables.byte_vars[index] if index < len(variables.byte_vars)
                       else z3.BitVec(f"b{index}", 8))  # a byte past the parent's end
                value = model[var]
                if value is not None:
                    child[index] = value.as_long()
        return bytes(child), result

    def _attempt(self, constraints: list[z3.BoolRef], flipped: z3.BoolRef, mask: int,
                 variables: InputVariables, n: int, min_length: int,
                 ) -> tuple[z3.CheckSatResult, z3.ModelRef | None, int]:
        """One solve for a parent of length ``n``: result, model and the child's length."""
        solver = z3.SimpleSolver()
        solver.set("timeout", self.query_ms)
        solver.add(*constraints)
        solver.add(flipped)
        new_length = n
        if min_length > n:
            solver.add(variables.length >= min_length)
            mask |= LENGTH_BIT
        if mask & LENGTH_BIT:
            # Keep the length if possible, else widen |len - n| by powers of 4 (shortest change).
            length, limit, width = variables.length, self.options.max_input_len, 0
            if min_length > n:  # a required growth: one query on the whole range first
                width = min_length - n
                result, model = self._check(solver, [length <= limit])
                if model is None:
                    self._beyond_limit(solver, result, length, limit)
                    return result, None, n
            while True:
                low, high = max(0, n - width), min(limit, n + width)
                result, model = self._check(solver, [length >= low, length <= high])
                if model is not None or result == z3.unknown or (low == 0 and high == limit):
                    break
                width = max(1, width * 4)
            if model is None:
                self._beyond_limit(solver, result, length, limit)
            if model is not None:
                new_length = model.eval(length, model_completion=True).as_long()
                if new_length != n:
                    self.stats["length_changes"] += 1
        else:
            result, model = self._check(solver, [])
        return result, model, new_length

    def _replay(self, child: bytes, index: int, site: int, direction: bool, grows: bool) -> Run:
        """Report the child of branch ``index`` (its concrete run), counting a divergence."""
        # A child that grew past an end-of-input branch meets that branch again at the same
        # index (at its new length): its bound leaves it negatable, so the input can keep growing.
        run = self._report(child, index if grows else index + 1)
        if grows:
            self.stats["input_growths"] += 1
        elif not run.took(index, site, direction):
            self.stats["divergences"] += 1
        return run

    def _report(self, child: bytes, bound: int) -> Run:
        """Run ``child`` concretely and report it with ``bound`` (a crash or hang once confirmed)."""
        self.progress.executing(child, bound, False)
        run = self._execute(child, symbolic=False)
        candidate = CandidateOut(data=child, trace=run.trace, kind=run.kind, bound=bound,
                                 detail=run.detail)
        if run.kind is not ExitKind.OK and self.options.confirm_findings:
            self.pending.append(candidate)
            return run
        self.candidates.append(candidate)
        self.progress.candidate(candidate)
        return run
