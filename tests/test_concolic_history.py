"""A concolic task's search depends on the task alone, not on what the process ran before it.

A worker's engine child is long-lived and runs many tasks of several targets. z3's answer to a
query with many models depended on the state of the one shared z3 context (the ids its terms
got), so the same search took other paths after other engine work in the process (seen in CI:
``examples/constructs/bytes_methods`` not found in 5 tasks after an engine run over ``json``).
Each task now has a z3 context of its own (``worker/concolic/z3scope``).
"""

from __future__ import annotations

import hashlib
from collections import deque
from pathlib import Path

import pytest
import z3

from symfence.protocol.coverage import CoverageMap
from symfence.worker.concolic.engine import ConcolicEngine
from symfence.worker.executors.base import ExitKind, Task

Trail = list[tuple[bytes, int, tuple[tuple[bytes, int, str], ...]]]


def trail(target: str, options: dict, max_tasks: int) -> Trail:
    """Every task of a generational search from one zero byte (a fresh engine, so no memo is
    shared): its input, bound and children (data, bound, kind), in order."""
    engine, coverage = ConcolicEngine(), CoverageMap()
    queue, out = deque([(b"\x00", 0)]), []
    while queue and len(out) < max_tasks:
        data, bound = queue.popleft()
        work_id = hashlib.sha256(data + bound.to_bytes(4, "big")).hexdigest()
        outcome = engine.run_task(Task("t", work_id, data, target, bound, options))
        assert outcome.status is ExitKind.OK, outcome.error
        out.append((data, bound, tuple((c.data, c.bound, c.kind.value) for c in outcome.candidates)))
        queue.extend((c.data, c.bound) for c in outcome.candidates
                     if c.kind is ExitKind.OK and coverage.merge(c.trace))
    return out


def test_a_search_is_the_same_whatever_the_engine_ran_before(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sf_history_json.py").write_text(
        "import json\n\n\ndef target(data):\n    try:\n        json.loads(data)\n"
        "    except ValueError:\n        pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    bytes_methods = "examples.constructs.bytes_methods:target"
    first = trail(bytes_methods, {}, 60)
    # other work in between: json's own scanner rewritten (what CI ran before), a regex search,
    # and z3 terms the process keeps
    engine = ConcolicEngine()
    for data in (b"\x00", b"{\x01\x00\x00"):
        outcome = engine.run_task(Task("t", f"json-{data!r}", data, "sf_history_json:target", 0,
                                       {"instrument": "json"}))
        assert outcome.status is ExitKind.OK and outcome.candidates, outcome.error
    trail("examples.constructs.regex_search:target", {}, 10)
    kept = [z3.BitVec(f"kept{i}", 8) + i for i in range(100)]  # noqa: F841 - alive across the rerun
    again = trail(bytes_methods, {}, 60)
    assert [t[:2] for t in again] == [t[:2] for t in first]  # the same tasks, in the same order
    assert again == first  # and the same children of each


def test_each_task_gets_a_fresh_context_and_empty_z3_caches() -> None:
    from symfence.worker.concolic import retheory
    from symfence.worker.concolic.z3scope import task_context

    outside = z3.main_ctx()
    with task_context() as first:
        assert z3.main_ctx() is first and first is not outside
        retheory.translate("a+b", 0)
        assert retheory._translate.cache_info().currsize == 1
    assert retheory._translate.cache_info().currsize == 0  # no z3 term outlives its task
    with task_context() as second:
        assert z3.main_ctx() is second and second is not first
        assert z3.BitVec("x", 8).ctx is second
    assert z3.main_ctx() not in (first, second)
