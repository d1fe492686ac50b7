"""Native mutation slices (issue 22): the havoc mutator, the slice handler on a real afl-cc build
through its forkserver, the executor over the child seam, and the plan that hands slices out."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import msgpack
import pytest

from symfence.coordinator import config as config_mod
from symfence.coordinator.hybrid import HybridPlan, Stage
from symfence.coordinator.scheduler import Scheduler, WorkKind
from symfence.protocol.fuzzslice import SliceSpec, pack_spec, unpack_spec
from symfence.protocol.options import NativeFuzzOptions
from symfence.worker.engine_api import ExitKind, Task
from symfence.worker.native.mutate import Mutator
from tests.native_support import built, compile_c, needs_afl, needs_cc, needs_tritondse

# A crash behind three nested byte comparisons: each level is a new edge, so coverage-guided
# mutation climbs them one at a time; blind mutation almost never guesses all three at once.
LADDER = r"""
#include <stdlib.h>
#include <unistd.h>
int main(void) {
    unsigned char b[64];
    long n = read(0, b, sizeof b);
    if (n > 2 && b[0] == 'F') {
        if (b[1] == 'U') {
            if (b[2] == '!') abort();
        }
    }
    int count = 0;
    for (long i = 0; i < n; i++) count += b[i] == 'A';  /* hit-count buckets of one edge */
    return count > 40;
}
"""


# ------------------------------------------------------------------------------ the mutator

def test_mutator_is_deterministic_given_a_seed_and_respects_max_len():
    corpus = [b"SFRC" + bytes(28), b"hello world", bytes(range(200))]
    runs = []
    for _ in range(2):
        m = Mutator(1234, max_len=64, tokens=[b"MAGIC!"])
        runs.append([m.mutate(corpus[i % 3], corpus) for i in range(2000)])
    assert runs[0] == runs[1]
    other = Mutator(1235, max_len=64, tokens=[b"MAGIC!"])
    assert [other.mutate(corpus[i % 3], corpus) for i in range(2000)] != runs[0]
    assert all(1 <= len(x) <= 64 for x in runs[0])
    assert len(set(runs[0])) > 1600  # mutations, not copies
    assert sum(x != corpus[i % 3] for i, x in enumerate(runs[0])) > 1900
    assert any(b"MAGIC!" in x for x in runs[0])  # dictionary tokens are used
    grown = [x for x in runs[0] if len(x) > 32 and x[:4] == b"SFRC"]
    assert grown  # blocks are inserted, not only overwritten
    assert any(len(x) < 11 for x in runs[0])  # and deleted


def test_mutator_never_exceeds_a_tiny_max_len_or_returns_empty():
    m = Mutator("seed", max_len=3)
    outs = [m.mutate(b"", [b"", b"abcdefgh"]) for _ in range(3000)]
    assert all(1 <= len(x) <= 3 for x in outs)
    assert len(set(outs)) > 100


# ----------------------------------------------------------------- the slice on a real build

@pytest.fixture(scope="module")
def ladder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ladder")
    plain = compile_c(folder, "ladder", LADDER)
    compile_c(folder, "ladder.afl", LADDER, cc="afl-cc")
    return plain


def _slice(runner, target: Path, corpus: Path, seed: str, **options):
    opts = NativeFuzzOptions.from_mapping({"exec_timeout_s": 1.0, **options})
    return runner.slice(str(target), str(corpus), seed, opts)


@needs_cc
@needs_afl
def test_slice_keeps_new_coverage_finds_the_crash_and_is_deterministic(ladder, tmp_path):
    from symfence.protocol.coverage import MAP_SIZE
    from symfence.worker.native.fuzz_slice import TOKENS_FILE, SliceRunner, new_bits

    outcomes, corpora = [], []
    for i in range(2):
        corpus = tmp_path / f"corpus{i}"
        corpus.mkdir()
        (corpus / ("0" * 40)).write_bytes(b"AAAA")
        (corpus / TOKENS_FILE).write_bytes(msgpack.packb([b"FU", b"!"]))  # the spec's dictionary
        runner = SliceRunner(str(tmp_path))
        try:
            outcomes.append(_slice(runner, ladder, corpus, "fixed-seed", slice_s=120.0, max_execs=3000,
                                   max_len=32))
        finally:
            runner.close()
        corpora.append(sorted(p.name for p in corpus.iterdir()))
    a, b = outcomes
    assert a.status is ExitKind.OK and a.execs == 3000 and a.stats["native_fuzz_calibrated"] == 1
    assert [(c.kind, c.data) for c in a.candidates] == [(c.kind, c.data) for c in b.candidates]
    assert corpora[0] == corpora[1]
    kept = [c for c in a.candidates if c.kind is ExitKind.OK]
    crashes = [c for c in a.candidates if c.kind is ExitKind.CRASH]
    assert len(kept) >= 3 and all(1 <= len(c.data) <= 32 for c in a.candidates)
    assert any(c.data[:2] == b"FU" for c in kept)  # climbed the ladder
    assert crashes and crashes[0].data[:3] == b"FU!" and "SIGABRT" in crashes[0].detail
    assert len(crashes) == 1  # the same crash again is not new to the slice's crash map
    # every kept input brought something new (edge or hit-count bucket) in the order found
    virgin = bytearray(MAP_SIZE)
    for c in kept:
        assert new_bits(virgin, c.trace) > 0
    # each kept input is in the corpus folder for the next slice (and the calibration of a new child)
    assert {c.data for c in kept} <= {p.read_bytes() for p in (tmp_path / "corpus0").iterdir()}


@needs_cc
@needs_afl
def test_executor_slice_over_the_seam_respects_its_time_and_keeps_the_corpus(ladder, tmp_path):
    from symfence.worker.executors.native_fuzz import NativeFuzzExecutor

    ex = NativeFuzzExecutor(workdir=str(tmp_path))
    try:
        spec = pack_spec(SliceSpec((b"AAAA", b"xyz"), (b"FU",)))
        outcomes = []
        for bound in (1, 2):
            data = spec if bound == 1 else pack_spec(SliceSpec())
            task = Task("a" * 64, "b" * 64, data, str(ladder), bound,
                        {"slice_s": 2.0, "max_len": 16, "afl_target": "{target}.afl"})
            t0 = time.monotonic()
            ex.start(task)
            while (outcome := ex.wait(0.1)) is None:
                assert time.monotonic() - t0 < 60, "slice did not end"
            outcomes.append((outcome, time.monotonic() - t0))
        (first, wall1), (second, _) = outcomes
        assert first.status is ExitKind.OK, first.error
        assert 2.0 <= first.wall_s < 4.0 and wall1 < 30  # the slice clock, plus a child start-up
        assert first.execs > 100 and first.stats["native_fuzz_calibrated"] == 2
        assert second.status is ExitKind.OK and second.stats["native_fuzz_calibrated"] == 0  # same child
        folder = Path(ex.corpus_dir(str(ladder)))
        kept = [c.data for c in first.candidates if c.kind is ExitKind.OK]
        assert kept and set(kept) <= {p.read_bytes() for p in folder.iterdir() if len(p.name) == 40}
        assert second.stats["native_fuzz_corpus"] >= 2 + len(kept)  # the next slice starts from them
        ex.start(Task("a" * 64, "c" * 64, b"not a spec", str(ladder), 3, {"slice_s": 1.0}))
        bad = ex.wait(5)
        assert bad is not None and bad.status is ExitKind.ERROR and "bad native fuzz slice" in bad.error
        ex.start(Task("a" * 64, "c" * 64, spec, str(ladder), 4, {"slice_s": 1.0, "bogus": 1}))
        bad = ex.wait(5)
        assert bad is not None and bad.status is ExitKind.ERROR and "bogus" in bad.error
    finally:
        ex.close()
    assert not os.path.exists(folder)


@needs_cc
@needs_afl
def test_a_slice_asked_to_end_its_turn_answers_at_once_and_its_child_goes_on(ladder, tmp_path):
    """engine_api.Turns: an engine task (or a re-run) waiting behind a slice has the worker end
    it (SIGUSR1 to the child, which stops after its current execution): before, native slices
    could not be ended and the engine waited out every 10 s slice (4.9 s of engine time in 120
    worker-seconds of a 60 s campaign where it found most edges first). The answer is a normal
    one and the child, with its calibrated map, serves the next slice."""
    from symfence.worker.engine_api import Turns
    from symfence.worker.executors.native_fuzz import NativeFuzzExecutor

    ex = NativeFuzzExecutor(workdir=str(tmp_path))
    assert isinstance(ex, Turns)
    try:
        spec = pack_spec(SliceSpec((b"AAAA", b"xyz"), ()))
        walls, pids = [], []
        for bound in (1, 2):
            ex.start(Task("a" * 64, "b" * 64, spec if bound == 1 else pack_spec(SliceSpec()), str(ladder),
                          bound, {"slice_s": 30.0, "max_len": 16, "afl_target": "{target}.afl"}))
            t0 = time.monotonic()
            while not ex.end_turn():  # taken once the child runs the slice
                assert ex.wait(0.02) is None and time.monotonic() - t0 < 60, "no slice to end"
            asked = time.monotonic()
            while (outcome := ex.wait(0.05)) is None:
                assert time.monotonic() - t0 < 60, "the slice did not end"
            walls.append(time.monotonic() - asked)
            pids.append(ex.child_pid)
            assert outcome.status is ExitKind.OK and "killed_by_parent" not in outcome.stats, outcome
        assert max(walls) < 5.0, walls  # not the 30 s slice (and not killed: stats above)
        assert pids[0] == pids[1] and pids[0] is not None  # the same child: its map kept
    finally:
        ex.close()


# ------------------------------------------------------------ the engine's own view (the fix)

class _NoEvents:
    def entered(self, *a: object) -> None: ...
    def found(self, *a: object) -> None: ...
    def subgroup(self, *a: object) -> None: ...


@needs_cc
@needs_afl
@needs_tritondse
def test_engine_children_on_edges_a_slice_covered_first_stay_new_to_the_engine(tmp_path):
    """tlv from 32 zero bytes: the engine's child 'C' + zeros (first step towards the record two
    containers deep) runs edges a slice's inputs already reached. Against the shared map alone it
    is nothing new (the worker dropped it, and the engine's search ended); in the engine's own view
    it is a new edge, so the filters keep it. With the engine alone nothing changes: its own view
    is new exactly when the shared map is."""
    from symfence.protocol.coverage import CoverageMap
    from symfence.worker.native.forkserver import ForkserverOracle
    from symfence.worker.native.runner import ENGINE_VIEW, Runner, engine_trace, salted, target_salt

    tlv = str(built() / "tlv")
    salt = target_salt(tlv)
    runner = Runner(str(tmp_path))
    oracle = ForkserverOracle(tlv + ".afl", input_mode="stdin", exec_timeout_s=1.0, mem_limit_mb=0,
                              work_dir=str(tmp_path))
    try:
        shared = CoverageMap()  # what slices of this target reported first: the parser's records
        for data in (b"C\x00", b"C\x02P\x00", b"C\x00C\x00C\x00", b"I\x04abcd", b"P\x00Z", b"C\x02C\x00"):
            shared.merge(salted(oracle.run(data).trace, salt))
        out = runner.run_task(tlv, bytes(32), 0, {"oracle": "forkserver", "afl_target": "{target}.afl"},
                              _NoEvents())
        assert out.status is ExitKind.OK
        alone = CoverageMap()
        for cover in (shared, alone):
            cover.merge(out.trace)
        child = next(c for c in out.candidates if c.data[:1] == b"C")
        real = salted(oracle.run(child.data).trace, salt)  # the child's edges as a slice reports them
    finally:
        oracle.close()
        runner.close()
    assert real and set(real) < set(child.trace)
    assert shared.has_new_bits(real) == 0  # a slice covered them first: nothing new in the shared map
    assert shared.has_new_bits(child.trace) == 2  # the engine's own view: a new edge, so it is kept
    assert alone.has_new_bits(child.trace) == alone.has_new_bits(real) == 2  # alone: the same verdict
    # the view is the same edges again, ENGINE_VIEW on; without an oracle (the engine's own trace) none
    trace = {3: 1, 7: 5}
    both = {**salted(trace, salt), **salted(trace, salt + ENGINE_VIEW)}
    assert engine_trace(trace, salt, own_view=True) == both
    assert engine_trace(trace, salt, own_view=False) == salted(trace, salt)


# ---------------------------------------------------------------------------------- the plan

def _native_cfg(tmp_path: Path, **fuzz) -> config_mod.Config:
    raw = {"campaign": {"executor": "native", "targets": ["./prog"], "duration_s": 30},
           "native": {"options": {"oracle": "forkserver"}},
           "fuzz": {"slice_s": 5.0, "native_slices": True, **fuzz}}
    return config_mod.parse(raw, tmp_path / "c.toml")


def test_plan_hands_native_slices_to_a_rank_without_engine_work(tmp_path):
    plan = HybridPlan.from_config(_native_cfg(tmp_path, share=0.0))
    assert plan.fuzz_on and plan.fuzz_stage is Stage.NATIVE_FUZZ
    plan.add_entry("./prog", b"seed")
    sched = Scheduler()
    item = plan.pick(1, sched)
    assert item is not None and item.kind is WorkKind.FUZZ_SLICE and plan.stage_of(item) is Stage.NATIVE_FUZZ
    assert unpack_spec(item.data).entries == (b"seed",)
    assert plan.pick(1, sched) is None  # one slice per rank at a time
    opts = NativeFuzzOptions.from_mapping(plan.slice_options(3.04))  # the wire options parse
    assert opts.slice_s == 3.0 and opts.afl_target == "{target}.afl"
    plan.slice_ended(item, committed=True)
    assert unpack_spec(plan.pick(1, sched).data).entries == ()  # acknowledged: not resent
    assert "native_fuzz_busy_s" in plan.stat_items() and "fuzz " in plan.status_text()
    assert "stage_native_fuzz_results" in plan.counters()


def test_the_engine_takes_its_own_children_before_the_slices_finds():
    from symfence.coordinator.scheduler import WorkItem

    sched = Scheduler()
    sliced = WorkItem("1" * 64, b"x", "s", "./prog", 0, new_bits=2, origin="native_fuzz")
    child = WorkItem("2" * 64, b"y", "s", "./prog", 7, new_bits=1, origin="native")
    fuzz = WorkItem("3" * 64, b"z", "s", "./prog", 0, new_bits=1, origin="fuzz")
    for item in (sliced, child, fuzz):
        sched.add(item)
    assert [sched.pop().work_id[0] for _ in range(3)] == ["3", "2", "1"]


def test_plan_native_slices_off_by_config_or_without_an_afl_build(tmp_path):
    off = HybridPlan.from_config(_native_cfg(tmp_path, native_slices=False))
    assert not off.fuzz_on and off.pick(1, Scheduler()) is None
    raw = {"campaign": {"executor": "native", "targets": ["./prog"]}, "native": {"options": {}}}
    assert not HybridPlan.from_config(config_mod.parse(raw, tmp_path / "c.toml")).fuzz_on  # oracle "engine"
    with pytest.raises(config_mod.ConfigError) as err:
        _native_cfg(tmp_path, native_slices="yes")
    assert err.value.key == "fuzz.native_slices"
    raw = {"campaign": {"executor": "native", "targets": ["./p"]},
           "native": {"options": {"oracle": "forkserver"}}}
    assert not HybridPlan.from_config(config_mod.parse(raw, tmp_path / "c.toml")).fuzz_on  # opt-in
    raw = {"campaign": {"executor": "native", "targets": ["./p"]}, "dispatch": {"deadline_s": 10},
           "native": {"options": {"oracle": "forkserver"}}, "fuzz": {"native_slices": True}}
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.parse(raw, tmp_path / "c.toml")
    assert err.value.key == "dispatch.deadline_s"  # a 10 s slice could not finish in time


# ------------------------------------------------------------------------- under real mpiexec

@pytest.mark.mpi
@pytest.mark.heavy  # busy shares: 6.5 of 7 s per rank with three CPU hogs beside (bound 3.5)
@needs_cc
@needs_afl
@needs_tritondse
def test_native_campaign_keeps_workers_busy_with_slices_until_the_budget(ladder, tmp_path):
    """The engine is given nothing to do (max_candidates = 0: the seeds are its whole search);
    its share is fixed at half (`auto` would starve an engine that finds nothing, and whether it
    ran a slice's find in 7 s became a race: CI saw one engine result);
    without slices the campaign ends at once, "work exhausted"; with them both workers mutate
    through the forkserver until the budget, and their finds are committed to the corpus."""
    from tests.mpi_helpers import run_campaign

    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "a").write_bytes(b"AAAA")
    cfg = {"campaign": {"executor": "native", "targets": [str(ladder)], "seeds": str(seeds),
                        "duration_s": 7},
           "dispatch": {"depth": 2, "deadline_s": 60},
           "fuzz": {"slice_s": 2.0, "native_slices": False, "share": 0.5},
           "native": {"options": {"oracle": "forkserver", "max_candidates": 0, "engine_timeout_s": 20.0}},
           "triage": {"minimize": False}, "stats": {"interval_s": 0.5}}
    (tmp_path / "before").mkdir()
    before = run_campaign(tmp_path / "before", cfg, ranks=3, timeout_s=120)
    assert before.code == 0, before.explain()
    assert "campaign finished: work exhausted" in before.stdout

    cfg["fuzz"]["native_slices"] = True
    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=150)
    assert run.code == 0, run.explain()
    assert "campaign finished: duration reached" in run.stdout and "VIOLATED" not in run.stdout
    stats = dict(line.split(" : ", 1) for line in (run.out / "fuzzer_stats").read_text().splitlines())
    stats = {k.strip(): v.strip() for k, v in stats.items()}
    assert int(stats["native_fuzz_results"]) >= 4  # several slices per worker
    assert int(stats["native_fuzz_new_inputs"]) >= 2 and int(stats["native_fuzz_edges_first"]) >= 1
    db = sqlite3.connect(run.out / "journal.sqlite")
    origins = dict(db.execute("SELECT origin, count(*) FROM corpus GROUP BY origin").fetchall())
    db.close()
    assert origins.get("native_fuzz", 0) == int(stats["native_fuzz_new_inputs"])
    assert int(stats["native_results"]) > 1  # the engine ran the slices' finds too
    for rank in (1, 2):  # loose on a loaded machine: bench/bench_busy.py measures the goal
        busy, inside = float(stats[f"busy_s_rank_{rank}"]), float(stats[f"budget_busy_s_rank_{rank}"])
        assert busy >= inside >= 0.5 * 7, stats


class _TriageRows:
    """The journal's one triage call Triage.done makes, recorded (a stand-in for the journal)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, bytes | None]] = []

    def note_triage(self, kind: str, ident: int, *, min_data: bytes | None = None, **_: object) -> None:
        self.rows.append((kind, ident, min_data))


def test_minimization_near_the_end_is_cut_to_the_budget_and_owed_on_resume(tmp_path):
    """A minimization dispatched with less budget left than minimize_budget_s gets what is left
    (it ends with the campaign instead of being cancelled at the stop with its work lost); what it
    reached is saved, but if it ran to that cut the journal does not record it as final, so
    --resume minimizes it again."""
    from symfence.coordinator.outputs import OutputDir
    from symfence.coordinator.triage import MinJob, Triage
    from symfence.protocol.ids import sha256_hex
    from symfence.protocol.messages import Candidate, Cost, Result, Status

    rows = _TriageRows()
    triage = Triage(OutputDir(tmp_path / "out"), rows, base_executor="native", base_options={}, budget_s=60.0)
    data = b"crash-input-of-some-length"
    for budget_left, wall_s, cut in ((500.0, 60.0, False), (7.04, 7.0, True), (0.5, 2.0, True),
                                     (30.0, 3.0, False)):  # the last one finished within its cut
        job = MinJob("crash", 0, "./prog", data, "key", "id:000000,sig:X")
        item = triage.task_for(job)
        triage.jobs[item.work_id] = job
        options = triage.options_for(item, budget_left)
        assert options["minimize_budget_s"] == min(60.0, max(2.0, round(budget_left, 1)))
        smaller = b"crash"
        found = Candidate(smaller, sha256_hex(smaller), kind=Status.CRASH)
        result = Result("a" * 64, item.work_id, Status.OK, (found,), Cost(wall_s, 1.0, 0, 10))
        rows.rows.clear()
        triage.done(item, result, 1, 10.0)
        assert rows.rows == ([] if cut else [("crash", 0, smaller)])
        assert (tmp_path / "out" / "minimized" / "crashes" / job.name).read_bytes() == smaller
    assert not triage.cut


@pytest.mark.mpi
@pytest.mark.heavy
@needs_cc
@needs_afl
@needs_tritondse
def test_slices_reaching_the_parser_first_do_not_starve_the_engines_deep_search(tmp_path):
    """tlv's TlvDepthBug from 32 zero bytes with slices covering the parser before the engine runs:
    one worker, one slot, share 0.5, so the first dispatch is a 2 s slice. The engine's children on
    the way to the record two containers deep ('C', then 'C' inside it) reach edges that slice
    already covered; judged against the shared map alone they were dropped and the engine's search
    ended there, leaving only the slices' finds as a way to the bug. Judged by the engine's own view
    as well, the engine's own line finds it, as it does alone."""
    from tests.mpi_helpers import run_campaign
    from tests.test_native_mpi import found, replay, stop_when

    tlv = built() / "tlv"
    cfg = {"campaign": {"executor": "native", "targets": [str(tlv)], "duration_s": 45},
           "dispatch": {"depth": 1, "deadline_s": 60},
           "fuzz": {"slice_s": 2.0, "native_slices": True, "share": 0.5},
           "native": {"options": {"oracle": "forkserver", "engine_timeout_s": 20.0}},
           "triage": {"minimize": False}, "stats": {"interval_s": 0.5}}
    out = tmp_path / "out"
    run = run_campaign(tmp_path, cfg, ranks=2, timeout_s=150,
                       on_start=stop_when(found(out, [str(tlv)], []), 45))
    assert run.code == 0, run.explain()
    crashes = list((out / "crashes").iterdir()) if (out / "crashes").is_dir() else []
    stats = dict(line.split(" : ", 1) for line in (out / "fuzzer_stats").read_text().splitlines())
    stats = {k.strip(): v.strip() for k, v in stats.items()}
    assert int(stats["native_fuzz_results"]) >= 1 and int(stats["native_fuzz_edges_first"]) >= 1, stats
    assert len(crashes) == 1, f"TlvDepthBug not found within 45 s: {stats}"
    assert replay(tlv, crashes[0].read_bytes()) == -6  # SIGABRT on the plain build
    # ... and the engine's own line found it: the task whose child crashed descends from the seed
    # through the engine's children only (not through a slice's find, the way left before the fix)
    db = sqlite3.connect(out / "journal.sqlite")
    (work_id,) = db.execute("SELECT work_id FROM findings WHERE kind = 'crash'").fetchone()
    (queue_id,) = db.execute("SELECT queue_id FROM work WHERE work_id = ?", (work_id,)).fetchone()
    line = []
    while queue_id is not None:
        origin, queue_id = db.execute("SELECT origin, parent FROM corpus WHERE queue_id = ?",
                                      (queue_id,)).fetchone()
        line.append(origin)
    db.close()
    assert line[-1] == "seed" and set(line[:-1]) == {"native"}, line
