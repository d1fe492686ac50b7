"""Hybrid scheduling: which stage (an engine or a mutation slice) each free dispatch slot gets.

``campaign.executor`` picks the stages: ``hybrid`` (both), ``concolic`` (engine only), ``fuzz``
(Atheris only), ``synthetic`` (benchmarks) or ``native`` (TritonDSE / SymCC, and native mutation
slices through the AFL++ forkserver while ``fuzz.native_slices`` is on and the oracle has an
afl-cc build: ``worker/executors/native_fuzz.py``; they play the fuzz slices' part below).
Corpus entries are work items of the corpus stage (the engine), scheduled by ``Scheduler`` with the
fuzzer's finds first; fuzz slices are transient work items made here on demand (not in the journal:
a lost slice is simply not redone). An Atheris slice is one *turn* of the worker's long-lived
fuzzing process for the target (``worker/executors/fuzz.py``): it runs during the turn and is
stopped between turns, so the slices' share is the share of the CPU that process gets. Each slice carries the corpus entries and dictionary tokens of
its target that its rank has not acknowledged yet (a rank acknowledges by a committed slice result),
as a ``protocol.fuzzslice`` spec.

Share of worker time for fuzz slices (``fuzz.share``): a number, or ``"auto"``: each stage's
recent rate of first-found edges per busy second decides (both figures decay by e^-1 per 60 busy
seconds of both stages; the fuzz stage's count starts at one edge, the engine's at none), squared and
normalized, clamped to [0.75, 0.97] (0.9 until both stages have run for a while): an engine that
finds nothing gets 3% of the workers' time (also when neither stage finds anything), one that
finds much at most a quarter.
Whatever the share, a rank whose engine queue is empty fuzzes, and so does a
rank once less of the budget is left than the engine's mean task takes (that task would be
cancelled unfinished at the end; a slice is cut to the budget). A rank holds at most one fuzz slice
at a time while the engine has work; its other dispatch slots take engine tasks only while the
fuzz stage is not behind its share (a worker runs its WORK in order: an engine task queued behind
every turn would give the engine a turn's worth of tasks whatever the share). Engine tasks in
flight count in the share at the time they have had so far (``clock``): a task that runs long
(25-30 s at load where most take a second, measured) is the engine's time while it runs, not
only once its result is committed; a cancelled one (at the budget's end) never is.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from symfence.coordinator.config import native_slices_on
from symfence.coordinator.credit import EngineFinds
from symfence.coordinator.engines import ENGINES, MODES, EngineSpec, Slices, Stage, TargetKind
from symfence.coordinator.scheduler import Scheduler, WorkItem, WorkKind
from symfence.protocol.fuzzslice import SliceSpec, pack_spec
from symfence.protocol.options import NativeFuzzOptions
from symfence.protocol.rules import is_token
from symfence.protocol.ids import Rank, sha256_hex, work_id_for

# The fuzz share: the engine's goes down to 3% where it finds nothing, and never above a quarter.
# At most half (0.5), five harnesses at 90 s ran 0.57-0.87x Atheris's executions per worker and
# 0.94-1.46x its lines; at most a quarter, 0.59-1.08x and 1.00-1.23x: dateutil 0.94 -> 1.15,
# pefile (the engine's harness) 1.46 -> 1.23 (docs/benchmarks.md, "OSS-Fuzz harnesses", run 7).
_AUTO_MIN, _AUTO_MAX = 0.75, 0.97
_AUTO_WARMUP = 0.9  # the share until both stages have run for a while: the engine gets 10% to be judged
_AUTO_WARMUP_S = 5.0  # busy seconds of both stages together before "auto" trusts the rates ...
_AUTO_WARMUP_RESULTS = 3  # ... and results of each
# The rates "auto" compares are recent ones: each stage's first-found edges and busy seconds
# decay by e^(-1) per this many busy seconds of both stages together, so neither stage's early
# burst (the fuzz stage's first turn, the engine's first runs of the seeds) decides for good.
_AUTO_MEMORY_S = 60.0
_FUZZ_YIELD_S = 1.0  # a fuzz turn's least length before it yields to a waiting engine task
_MAX_TOKENS = 512  # per target; libFuzzer dictionaries beyond this mostly add noise
_MAX_SPEC_BYTES = 4 << 20  # corpus bytes per slice (WORK messages stay far below the 16 MiB limit)


@dataclass
class StageFigures:
    execs: int = 0
    new_inputs: int = 0  # corpus entries it added
    crashes: int = 0  # unique crashes it found
    hangs: int = 0
    edges_first: int = 0  # map edges it was the first to hit
    busy_s: float = 0.0  # worker wall time of its committed results
    results: int = 0


@dataclass
class _SliceInfo:
    rank: Rank
    target: str
    cursor: tuple[int, int]  # (entries, tokens) of the target this slice brings the rank up to


@dataclass
class HybridPlan:
    mode: str
    targets: list[str]
    fuzz_options: dict[str, Any]
    share_setting: float | str = "auto"
    depth: int = 2
    dictionary: bool = True
    native_slices: bool = False  # native mode: mutation slices fill the engine's idle slots
    entries: dict[str, list[bytes]] = field(default_factory=dict)
    tokens: dict[str, list[bytes]] = field(default_factory=dict)
    figures: dict[EngineSpec, StageFigures] = field(default_factory=dict)  # per stage (engines.py)
    _token_sets: dict[str, set[bytes]] = field(default_factory=dict)
    _acked: dict[tuple[Rank, str], tuple[int, int]] = field(default_factory=dict)
    _slices: dict[str, _SliceInfo] = field(default_factory=dict)  # work_id -> slice in flight
    _seq: int = 0
    _recent: dict[EngineSpec, list[float]] = field(default_factory=dict)  # stage -> [edges, busy], decayed
    _seen: dict[EngineSpec, tuple[int, float]] = field(default_factory=dict)  # (edges, busy) last folded in
    clock: Callable[[], float] = time.monotonic
    _engine: dict[str, tuple[Rank, float]] = field(default_factory=dict)  # engine task in flight -> (rank, sent)
    _engine_held: dict[Rank, int] = field(default_factory=dict)  # rank -> its entries in _engine
    _engine_sent_sum: float = 0.0  # of the send times in _engine: their running time without a scan
    _finds: EngineFinds | None = None  # both stages run: the engine's recent first finds (credit.py)

    @classmethod
    def from_config(cls, cfg: Any) -> HybridPlan:
        fz = cfg.section("fuzz")
        mode = cfg["campaign.executor"]
        native_slices = native_slices_on(cfg)
        if native_slices:
            options = NativeFuzzOptions.for_campaign(fz, cfg["native.options"])
        else:
            options = {k: fz[k] for k in ("slice_s", "exec_timeout_s", "max_len", "max_candidates")}
            if fz["rss_limit_mb"] != 2048:  # (work ids of campaigns without it as before)
                options["rss_limit_mb"] = fz["rss_limit_mb"]
            if not fz["library_dict"]:  # (the same)
                options["library_dict"] = False
            options["cov_include"] = ",".join(cfg["coverage.include"])
        depth = cfg["dispatch.depth"]  # "auto": slices are long tasks, for which auto picks 2
        plan = cls(mode, list(cfg["campaign.targets"]), options, fz["share"],
                   depth if type(depth) is int else 2, fz["dictionary"], native_slices)
        for stage in ENGINES.values():
            plan.figures[stage] = StageFigures()
        if plan.fuzz_on and plan.concolic_on:  # a turn reports at its end: remember a few turns back
            plan._finds = EngineFinds(horizon_s=max(60.0, 3 * float(fz["slice_s"])))
        if fz["dict"]:  # the user's dictionary: every target's first tokens (checked by preflight)
            from symfence.coordinator.fuzzdict import read_tokens

            tokens = read_tokens(Path(fz["dict"]))  # from the working directory, as seeds
            for target in plan.targets:
                plan.add_tokens(target, tokens)
        return plan

    # -- what runs ------------------------------------------------------------------------------

    @functools.cached_property
    def concolic_on(self) -> bool:
        """Whether the corpus engine runs corpus entries (not only re-runs of findings). (The mode
        never changes: this and the two below are computed once; `pick` asks per free slot.)"""
        return MODES[self.mode].engine_runs

    @functools.cached_property
    def fuzz_on(self) -> bool:
        slices = MODES[self.mode].slices
        return slices is Slices.ALWAYS or (slices is Slices.OPTION and self.native_slices)

    @functools.cached_property
    def fuzz_stage(self) -> EngineSpec:
        """The mutation stage: Atheris slices, or native havoc slices for native programs."""
        return MODES[self.mode].mutation or Stage.FUZZ

    @functools.cached_property
    def corpus_stage(self) -> EngineSpec:
        """The engine that runs corpus entries (their work items); `mode` never changes, and
        every committed result asks (stage_of), so it is computed once."""
        return MODES[self.mode].corpus

    def share(self) -> float:
        """The fuzz stage's current target share of worker time."""
        if not self.fuzz_on:
            return 0.0
        if not self.concolic_on:
            return 1.0
        if self.share_setting != "auto":
            return float(self.share_setting)
        fz, cc = self.figures[self.fuzz_stage], self.figures[self.corpus_stage]
        self._fold_recent()
        if min(fz.results, cc.results) < _AUTO_WARMUP_RESULTS or fz.busy_s + cc.busy_s < _AUTO_WARMUP_S:
            return _AUTO_WARMUP
        (fz_edges, fz_busy), (cc_edges, cc_busy) = self._recent[self.fuzz_stage], self._recent[self.corpus_stage]
        # The prior of one edge is the fuzz stage's alone: it is the cheap default and the engine
        # earns its time by finding. With one each, a stretch where neither finds anything rated
        # the stage that had less time higher, and the split settled at half each (a saturated
        # harness spent half its workers on an engine that found nothing: wave, run 6).
        fz_rate = (fz_edges + 1) / max(fz_busy, 1e-3)
        cc_rate = cc_edges / max(cc_busy, 1e-3)
        # Squared: the rates are marginal ones, measured at the current split; the better stage
        # gets more than its proportion (1:6 gives the engine 3%, not 14%; 1:1 would be half each).
        return min(_AUTO_MAX, max(_AUTO_MIN, fz_rate ** 2 / (fz_rate ** 2 + cc_rate ** 2)))

    def _fold_recent(self) -> None:
        """Fold what both stages added since the last call into their decayed figures."""
        stages = (self.fuzz_stage, self.corpus_stage)
        added = {}
        for stage in stages:
            f = self.figures[stage]
            edges, busy = self._seen.get(stage, (0, 0.0))
            added[stage] = (f.edges_first - edges, max(0.0, f.busy_s - busy))  # edges: < 0 if taken back
            self._seen[stage] = (f.edges_first, f.busy_s)
        decay = math.exp(-sum(busy for _, busy in added.values()) / _AUTO_MEMORY_S)
        for stage in stages:
            recent = self._recent.setdefault(stage, [0.0, 0.0])
            recent[0] = max(0.0, recent[0] * decay + added[stage][0])
            recent[1] = recent[1] * decay + added[stage][1]

    def pick(self, rank: Rank, scheduler: Scheduler, budget_left_s: float | None = None) -> WorkItem | None:
        """The next work item for a free slot of ``rank``: an engine task or a fuzz slice.
        ``budget_left_s``: what is left of the campaign's duration (None: no duration)."""
        if not self.fuzz_on:
            return scheduler.pop() if self.concolic_on else None
        held = sum(1 for s in self._slices.values() if s.rank == rank)
        if not self.concolic_on:
            return self._make_slice(rank) if held < self.depth else None
        if not len(scheduler):
            return self._make_slice(rank) if held < 1 else None
        if held < 1 and (self._fuzz_behind() or self._engine_too_long(budget_left_s)):
            return self._make_slice(rank)
        if held and self._behind_after_engine_task():
            return None  # an engine task queued behind the turn would run next, whatever the share
        item = scheduler.pop()
        if item is not None:
            self._engine_sent(rank, item.work_id)
        return item

    # -- engine tasks in flight -------------------------------------------------------------------

    def _engine_sent(self, rank: Rank, work_id: str) -> None:
        self.engine_ended(work_id)  # (sent again before its end was told: one entry, at the end)
        now = self.clock()
        self._engine[work_id] = (rank, now)  # in send order: the first entry is the oldest
        self._engine_sent_sum += now
        held = self._engine_held[rank] = self._engine_held.get(rank, 0) + 1
        if held > 2 * max(self.depth, 1):  # a rank holds at most `depth`: an end never told
            self.engine_ended(next(w for w, (r, _) in self._engine.items() if r == rank))

    def engine_ended(self, work_id: str) -> None:
        """An engine task's dispatch ended (committed, revoked or cancelled)."""
        entry = self._engine.pop(work_id, None)
        if entry is None:
            return
        rank, sent = entry
        self._engine_sent_sum = self._engine_sent_sum - sent if self._engine else 0.0
        held = self._engine_held[rank] - 1
        if held:
            self._engine_held[rank] = held
        else:
            del self._engine_held[rank]

    def _engine_running_s(self) -> float:
        """The time the engine's tasks in flight have had so far (their results not committed)."""
        if not self._engine:
            return 0.0
        return max(0.0, len(self._engine) * self.clock() - self._engine_sent_sum)

    def _engine_too_long(self, budget_left_s: float | None) -> bool:
        """Near the end of the budget, an engine task of the usual length would be cancelled
        unfinished (its work lost); a slice is cut to the budget and returns what it found."""
        cc = self.figures[self.corpus_stage]
        if budget_left_s is None or cc.results < _AUTO_WARMUP_RESULTS:
            return False
        # a task running longer than the mean already is one to expect (the first is the oldest)
        longest = self.clock() - next(iter(self._engine.values()))[1] if self._engine else 0.0
        return budget_left_s < max(cc.busy_s / cc.results, longest)

    def _fuzz_behind(self) -> bool:
        fz, cc = self.figures[self.fuzz_stage], self.figures[self.corpus_stage]
        in_flight = len(self._slices) * float(self.fuzz_options["slice_s"])
        total = fz.busy_s + cc.busy_s + self._engine_running_s() + in_flight
        share = self.share()
        return share > 0 and fz.busy_s + in_flight <= share * total

    def _behind_after_engine_task(self) -> bool:
        """Whether the fuzz stage would be behind its share after one more engine task of the
        usual length (in-flight slices count at their full length: without the task's own,
        the engine got a task behind every turn)."""
        fz, cc = self.figures[self.fuzz_stage], self.figures[self.corpus_stage]
        task_s = cc.busy_s / cc.results if cc.results else float(self.fuzz_options["slice_s"])
        in_flight = len(self._slices) * float(self.fuzz_options["slice_s"])
        share = self.share()
        engine_s = cc.busy_s + self._engine_running_s()
        return share > 0 and fz.busy_s + in_flight < share * (fz.busy_s + engine_s + in_flight + task_s)

    # -- fuzz slices --------------------------------------------------------------------------

    def _make_slice(self, rank: Rank) -> WorkItem:
        target = self.targets[self._seq % len(self.targets)]
        self._seq += 1
        sent_entries, sent_tokens = self._acked.get((rank, target), (0, 0))
        entries = self.entries.get(target, [])
        tokens = self.tokens.get(target, [])
        end, size = sent_entries, 0  # a long backlog goes over several slices, not one huge WORK
        while end < len(entries) and (end == sent_entries or size + len(entries[end]) <= _MAX_SPEC_BYTES):
            size += len(entries[end])
            end += 1
        spec = pack_spec(SliceSpec(tuple(entries[sent_entries:end]), tuple(tokens[sent_tokens:])))
        sha = sha256_hex(spec)
        stage = self.fuzz_stage.value  # also the executor's name
        work_id = work_id_for(stage, target, sha, self._seq, self.fuzz_options)
        self._slices[work_id] = _SliceInfo(rank, target, (end, len(tokens)))
        return WorkItem(work_id, spec, sha, target, self._seq, kind=WorkKind.FUZZ_SLICE)

    def turn_s(self) -> float:
        """How long a task runs before it ends its turn for any task waiting behind it on its
        worker (SETUP's ``turn_s``; 0: never): the fuzz turn's length, when both stages run. An engine task so ended hands back the branches it did not try
        (``Result.resume_at``), so the share decides again every turn instead of once per task
        of any length (24-33 s engine tasks on email-validator, measured)."""
        return float(self.fuzz_options.get("slice_s", 0.0)) if self.fuzz_on and self.concolic_on else 0.0

    def yield_s(self) -> dict[str, float]:
        """How long a fuzz turn runs at least before it ends early for an engine task queued behind
        it (SETUP's ``yield_s``, per executor). ``pick`` queues one there only while the engine
        is below its share, so the share holds; waiting out ``turn_s`` instead gave short engine
        tasks one round per fuzz turn (0.78 s of 81 worker-seconds at a share of a quarter)."""
        if not (self.fuzz_on and self.concolic_on):
            return {}
        return {self.fuzz_stage.value: min(_FUZZ_YIELD_S, self.turn_s())}

    def slice_options(self, budget_left_s: float | None) -> dict[str, Any]:
        """A slice's options: ``slice_s`` cut to what is left of the campaign's budget (>= 1 s)."""
        options = dict(self.fuzz_options)
        if budget_left_s is not None:
            options["slice_s"] = max(1.0, min(float(options["slice_s"]), round(budget_left_s, 1)))
        return options

    def slice_ended(self, item: WorkItem, *, committed: bool) -> None:
        """A slice's dispatch ended; a committed one acknowledges what it carried."""
        info = self._slices.pop(item.work_id, None)
        if info is not None and committed:
            key = (info.rank, info.target)
            old = self._acked.get(key, (0, 0))
            self._acked[key] = (max(old[0], info.cursor[0]), max(old[1], info.cursor[1]))

    # -- what the stages share ------------------------------------------------------------------

    def add_entry(self, target: str, data: bytes) -> None:
        self.entries.setdefault(target, []).append(data)

    def add_tokens(self, target: str, tokens: Any) -> int:
        """Dictionary tokens from the engine for the target's next slices; returns how many are new."""
        if not self.dictionary:
            return 0
        known = self._token_sets.setdefault(target, set())
        kept = self.tokens.setdefault(target, [])
        added = 0
        for token in tokens:
            if is_token(token) and token not in known \
                    and len(kept) < _MAX_TOKENS:
                known.add(token)
                kept.append(token)
                added += 1
        return added

    def stage_of(self, item: WorkItem) -> EngineSpec:
        return self.fuzz_stage if item.kind is WorkKind.FUZZ_SLICE else self.corpus_stage

    def credit_first(self, stage: EngineSpec, trace: dict[int, int], seen: bytes | bytearray, now: float,
                     began: float) -> int:
        """Credit `stage` with the edges of `trace` that are not in `seen` yet (returns how many),
        before the trace is merged; `began`: when the task began, as far as the coordinator knows
        (its commit less its wall time). While both stages run, a fuzz turn also takes back the
        edges the engine was credited with since its turn began (credit.py): it reached them too."""
        fig, finds = self.figures[stage], self._finds
        if finds is None:
            fresh = sum(1 for edge in trace if not seen[edge])
        elif stage is self.fuzz_stage:
            back = finds.reclaim(trace, began)
            if back:
                fig.edges_first += back
                self.figures[self.corpus_stage].edges_first -= back
            fresh = sum(1 for edge in trace if not seen[edge])
        else:
            new = [edge for edge in trace if not seen[edge]]
            finds.found(new, now)
            fresh = len(new)
        fig.edges_first += fresh
        return fresh

    # -- per-stage figures (fuzzer_stats, plot_data, status line) ------------------------------------

    _COUNTED = ("execs", "new_inputs", "crashes", "hangs", "edges_first", "results")

    def counters(self) -> dict[str, int]:
        """The figures as journal counters (so ``--resume`` continues them)."""
        out = {f"stage_{s.value}_{k}": int(getattr(self.figures[s], k)) for s in ENGINES.values()
               for k in self._COUNTED}
        out.update({f"stage_{s.value}_busy_ms": int(self.figures[s].busy_s * 1000) for s in ENGINES.values()})
        return out

    def restore(self, counters: dict[str, int]) -> None:
        for s in ENGINES.values():
            f = self.figures[s]
            for k in self._COUNTED:
                setattr(f, k, int(counters.get(f"stage_{s.value}_{k}", 0)))
            f.busy_s = counters.get(f"stage_{s.value}_busy_ms", 0) / 1000

    def _stages(self) -> list[EngineSpec]:
        """The stages shown: the corpus engine, and the mutation engine unless the mode never
        slices by option (a native campaign without slices, the synthetic benchmark)."""
        mode = MODES[self.mode]
        if mode.mutation is None or (mode.slices is Slices.OPTION and not self.native_slices):
            return [mode.corpus]
        return [mode.corpus, mode.mutation]

    def stat_items(self) -> dict[str, Any]:
        """``fuzzer_stats`` rows: per stage execs, new inputs, crashes, hangs, first-found edges
        and their share of all edges, busy seconds; and the fuzz share in force."""
        rows: dict[str, Any] = {}
        total = sum(self.figures[s].edges_first for s in self._stages())
        for stage in self._stages():
            f = self.figures[stage]
            rows.update({f"{stage.value}_execs": f.execs, f"{stage.value}_results": f.results,
                         f"{stage.value}_new_inputs": f.new_inputs, f"{stage.value}_crashes": f.crashes,
                         f"{stage.value}_hangs": f.hangs, f"{stage.value}_edges_first": f.edges_first,
                         f"{stage.value}_edges_share": f"{100.0 * f.edges_first / total if total else 0:.1f}%",
                         f"{stage.value}_busy_s": round(f.busy_s, 3)})
        rows["dictionary_tokens"] = sum(len(t) for t in self.tokens.values())
        rows["fuzz_share"] = round(self.share(), 3)
        rows["fuzz_share_setting"] = self.share_setting if self.fuzz_on and self.concolic_on else self.mode
        return rows

    def plot_columns(self) -> tuple[str, ...]:
        return tuple(f"{s.value}_{k}" for s in self._stages() for k in ("execs", "new_inputs", "crashes", "edges_first"))

    def plot_values(self) -> list[int]:
        return [v for f in (self.figures[s] for s in self._stages())
                for v in (f.execs, f.new_inputs, f.crashes, f.edges_first)]

    def status_text(self) -> str:
        """The status line's stage part: who found what (execs / new inputs / edges first)."""
        if self.corpus_stage.target is TargetKind.SYNTHETIC:
            return ""
        parts = []
        for stage in self._stages():
            f = self.figures[stage]
            parts.append(f"{stage.label or stage.name} {f.execs:,}x/{f.new_inputs}+/{f.edges_first}e")
        share = f"  fuzz share {self.share():.0%}" if self.fuzz_on and self.concolic_on else ""
        return "  ".join(parts) + share
