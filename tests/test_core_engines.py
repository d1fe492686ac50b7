"""Issue 28's engine registry: a new engine is one worker module plus one spec.

The toy engine below is a module written to a folder on the worker executors' package path (as
`worker/executors/toy.py` would be) and one `EngineSpec` with the mode that selects it. With
nothing else changed, the config accepts it, the coordinator (real `Campaign`, journal on, no
MPI) dispatches WORKs naming it, the worker side loads and runs it, its results commit and are
credited to its stage, and the scheduler and triage follow its spec.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest

import symfence.worker.executors as executors_pkg
from bench.bench_loop import offline_campaign
from symfence.coordinator import engines
from symfence.coordinator.campaign import Campaign
from symfence.coordinator.config import ConfigError, parse
from symfence.coordinator.engines import EngineSpec, Mode, Role, TargetKind
from symfence.coordinator.outputs import OutputDir
from symfence.coordinator.pump import Inbound
from symfence.coordinator.scheduler import Scheduler, WorkItem
from symfence.coordinator.triage import Triage
from symfence.protocol.codec import decode_work_frame, encode
from symfence.protocol.coverage import pack_trace
from symfence.protocol.messages import Cost, Result, Tag
from symfence.worker.engine_api import ExitKind, Task
from symfence.worker.executors import make_executor

TOY_MODULE = '''
"""A toy engine: every input's trace is its first byte as an edge."""
from symfence.worker.engine_api import ExitKind, Outcome


class ToyExecutor:
    def start(self, task):
        self._data = task.data

    def wait(self, timeout_s):
        return Outcome(ExitKind.OK, trace={1000 + self._data[-1]: 1}, execs=1, wall_s=0.0001)

    def abort(self):
        pass

    def close(self):
        pass


def executor():
    return ToyExecutor()
'''


@pytest.fixture
def toy(tmp_path):
    folder = tmp_path / "executors"
    folder.mkdir()
    (folder / "toy.py").write_text(textwrap.dedent(TOY_MODULE))
    executors_pkg.__path__.append(str(folder))  # as if the module sat in worker/executors/
    spec = EngineSpec("toy", TargetKind.SYNTHETIC, Role.CORPUS, None, "synthetic", minimize=False, tier=0)
    engines.register(spec, Mode("toy", spec, None))  # the one spec (and the mode that selects it)
    yield spec
    engines.unregister("toy")
    executors_pkg.__path__.remove(str(folder))
    sys.modules.pop(f"{executors_pkg.__name__}.toy", None)


def test_an_unknown_engine_is_refused_and_a_registered_one_is_accepted(toy):
    cfg = parse({"campaign": {"executor": "toy"}})
    assert cfg["campaign.targets"] == ["synthetic"] and cfg["campaign.executor"] == "toy"
    engines.unregister("toy")
    with pytest.raises(ConfigError, match="campaign.executor"):
        parse({"campaign": {"executor": "toy"}})
    engines.register(toy, Mode("toy", toy, None))  # (the fixture's teardown removes it again)


def test_the_scheduler_and_triage_read_the_spec(toy, tmp_path):
    s = Scheduler()
    found_by = {origin: WorkItem(f"{i:064x}", b"x", "0" * 64, "t", origin=origin)
                for i, origin in enumerate(("concolic", "fuzz", "toy", "native_fuzz"))}
    for item in found_by.values():
        s.add(item)
    order = [s.pop_for(1, lambda it: False).origin for _ in found_by]
    assert order == ["toy", "fuzz", "concolic", "native_fuzz"]  # toy's tier 0 first
    triage = Triage(OutputDir(tmp_path / "out"), None, base_executor="toy", base_options={})
    assert not triage.enabled and not triage.python  # the spec: no minimizing, no Python target


def test_a_campaign_runs_a_registered_engine_end_to_end_without_mpi(toy, tmp_path):
    async def run() -> Campaign:
        cfg = parse({"campaign": {"executor": "toy", "duration_s": 0},
                     "synthetic": {"seeds": 20, "task_ms": 0}})
        c, _ = offline_campaign(cfg, tmp_path / "out", workers=2)  # (its log stays open, as in test_batching:
        # closing it would leave structlog writing to a closed file in the tests after this one)
        runner = make_executor("toy")  # the worker side: the module, found by the spec's name
        for _ in range(100):
            sends, c.pump.out = c.pump.out, []
            frames = []
            for dest, tag, frame in sends:
                if tag != Tag.WORK:
                    continue
                for w in decode_work_frame(frame):
                    assert w.executor == "toy"
                    runner.start(Task(w.token, w.work_id, w.data, w.target, w.bound, w.options, w.attempt))
                    out = runner.wait(1.0)
                    assert out is not None and out.status is ExitKind.OK
                    r = Result(w.token, w.work_id, out.status, cost=Cost(out.wall_s, 0.0, 0.0, out.execs),
                               cov_version=w.cov_version, trace=pack_trace(out.trace))
                    frames.append(Inbound(dest, Tag.RESULT, encode(r)))
            if not frames:
                break
            c._on_batch(frames)
            while c.peers.pending():
                c._turn()
        c.journal.close()
        return c

    c = asyncio.run(run())
    assert c.stats.committed == 20 and c.stats.quarantine.total == 0
    assert c.plan.corpus_stage is toy and c.plan.figures[toy].results == 20
    assert c.plan.status_text() == ""  # a target-less engine shows no stage line, as synthetic
    assert c.stats.edges or c.coverage.seen.count(0) < len(c.coverage.seen)  # its traces reached the map
