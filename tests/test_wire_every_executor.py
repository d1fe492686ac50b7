"""Nothing an executor produces is refused (issue 17): every executor kind's real outcomes, with
names of the shapes real code has, go through the worker's result assembly, its single sender
and the coordinator's decoder, and decode as they were made (never turned into a task error)."""

from __future__ import annotations

import collections
import hashlib
import sys
import time
import types
import zlib
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from symfence.protocol.codec import decode_result
from symfence.protocol.coverage import CoverageMap
from symfence.protocol.fuzzslice import SliceSpec, pack_spec
from symfence.protocol.messages import Work
from symfence.protocol.rules import DEFAULT_LIMITS, MAX_INFO_KEYS, is_key
from symfence.worker.concolic.diagnose import stats_key
from symfence.worker.executors import make_executor
from symfence.worker.executors.base import CandidateOut, ExitKind, Outcome, Task
from symfence.worker.executors.concolic import ConcolicExecutor
from symfence.worker.executors.native import NativeExecutor
from symfence.worker.executors.synthetic import SyntheticExecutor
from symfence.worker.loop import Worker
from symfence.worker.sender import ResultSender
from tests.native_support import HAVE_AFL, HAVE_CC, HAVE_TRITONDSE, compile_c

TARGET = "examples.longnames.target:target"
TOKEN = "a" * 64
_LETTERS = st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"))
_IDENT = st.from_regex(r"[A-Za-z_\u00c0-\u024f\u0370-\u03ff\u4e00-\u4e2f][\w\u00c0-\u024f]{0,40}",
                       fullmatch=True)
# The shapes of names in real code: long qualified names, non-ASCII identifiers, spaces, 200 characters.
NAMES = st.one_of(
    st.lists(_IDENT, min_size=2, max_size=8).map(".".join),
    _IDENT,
    st.lists(_IDENT, min_size=2, max_size=6).map(" ".join),
    st.text(_LETTERS, min_size=150, max_size=200),
    st.text(_LETTERS, min_size=1, max_size=70),
)

NATIVE_SOURCE = r"""
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
void check_the_record_header_including_the_magic_and_the_length_fields_before_parsing(const char *b) {
    if (b[0] == 'N' && b[1] == 'L' && b[2] == '!') abort();
}
int main(int argc, char **argv) {
    char buf[64] = {0};
    FILE *f = argc > 1 ? fopen(argv[1], "rb") : stdin;
    if (!f) return 1;
    fread(buf, 1, sizeof buf - 1, f);
    check_the_record_header_including_the_magic_and_the_length_fields_before_parsing(buf);
    return 0;
}
"""


def _run(executor, task, limit_s=120.0) -> Outcome:
    executor.start(task)
    deadline = time.monotonic() + limit_s
    while (outcome := executor.wait(0.05)) is None:
        assert time.monotonic() < deadline, "task did not finish"
    return outcome


def _task(data: bytes, target: str = TARGET, **options) -> Task:
    return Task(TOKEN, hashlib.sha256(data).hexdigest(), data, target, 0, options)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, list[tuple[Task, Outcome]]]:
    """Real outcomes of every executor kind (each run once: they start processes)."""
    made: dict[str, list[tuple[Task, Outcome]]] = collections.defaultdict(list)
    synthetic = SyntheticExecutor()
    for data in (b"x", b"LN\x04BOOM"):
        t = _task(data, "synthetic", candidates=3, task_ms=0.0)
        made["synthetic"].append((t, _run(synthetic, t)))
    for kind, ex in (("concolic", ConcolicExecutor()), ("traced", make_executor("concolic"))):
        try:
            for data in (b"LN\x03ABCxyz", b"LN\x04BOOx", b"LN\x04BOOM"):
                t = _task(data, exec_timeout_s=1.0)
                made[kind].append((t, _run(ex, t)))
        finally:
            ex.close()
    fuzz = make_executor("fuzz")
    try:
        spec = pack_spec(SliceSpec((b"LN\x03ABCxyz", b"LN\x04BOOM"), (b"BOOM",)))
        t = Task(TOKEN, "f" * 64, spec, TARGET, 1, {"slice_s": 1.0, "exec_timeout_s": 0.5})
        made["fuzz"].append((t, _run(fuzz, t)))
    finally:
        fuzz.close()
    if HAVE_CC and HAVE_TRITONDSE:
        binary = compile_c(tmp_path_factory.mktemp("native"), "longnamed", NATIVE_SOURCE)
        with NativeExecutor() as native:
            for data in (b"NL!" + bytes(8), bytes(12)):
                t = _task(data, str(binary))
                made["native"].append((t, _run(native, t)))
    if HAVE_CC and HAVE_AFL:
        binary = compile_c(tmp_path_factory.mktemp("native_fuzz"), "longnamed", NATIVE_SOURCE)
        compile_c(binary.parent, "longnamed.afl", NATIVE_SOURCE, cc="afl-cc")
        slicer = make_executor("native_fuzz")
        try:
            spec = pack_spec(SliceSpec((b"NL" + bytes(8),), (b"NL!",)))
            t = Task(TOKEN, "e" * 64, spec, str(binary), 1, {"slice_s": 1.0, "exec_timeout_s": 0.5})
            made["native_fuzz"].append((t, _run(slicer, t)))
        finally:
            slicer.close()
    return made


def _assemble(task: Task, outcome: Outcome) -> tuple[Outcome, bytes, list]:
    """The worker's own path: `Worker._result` (coverage verdicts, packing) and its single sender."""
    worker = SimpleNamespace(coverage=CoverageMap(), counters=collections.Counter())
    work = Work(TOKEN, task.work_id, task.data, hashlib.sha256(task.data).hexdigest(), "x", task.target)
    result = Worker._result(worker, work, outcome)
    with capture_logs() as logs:
        frame = ResultSender(lambda f: None).seal(TOKEN, result)
    return result, frame, logs


def test_every_executor_kind_ran(outcomes):
    native = {"native"} if HAVE_CC and HAVE_TRITONDSE else set()
    native |= {"native_fuzz"} if HAVE_CC and HAVE_AFL else set()
    expected = {"synthetic", "concolic", "traced", "fuzz"} | native
    assert set(outcomes) == expected
    assert any(o.status is ExitKind.CRASH or any(c.kind is ExitKind.CRASH for c in o.candidates)
               for runs in outcomes.values() for _, o in runs if runs is not outcomes["synthetic"])
    long_keys = [k for _, o in outcomes["concolic"] for k in o.stats if "langenprufung" in k]
    assert long_keys and all(is_key(k) for k in long_keys)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["synthetic", "concolic", "traced", "fuzz", "native", "native_fuzz"]),
       names=st.lists(NAMES, min_size=1, max_size=80), deep=st.integers(0, 1500))
def test_nothing_an_executor_produces_is_refused(outcomes, kind, names, deep):
    """Each real outcome, with counters, tracebacks and tokens named the way code names things
    (as the engine names its counters: `stats_key`), is sent and decodes as it was made."""
    if kind not in outcomes:
        pytest.skip(f"{kind}: needs cc and tritondse (native) or AFL++ (native_fuzz)")
    for task, outcome in outcomes[kind]:
        stats = dict(outcome.stats)
        for i, name in enumerate(names):
            stats[stats_key("concretised_", name)] = stats.get(stats_key("concretised_", name), 0) + i
            stats[stats_key("left_via.", name)] = 1
        frames = "".join(f'  File "/src/{n}.py", line {i}, in {n}\n'
                         for i, n in enumerate(names * (1 + deep // 50)))
        traceback = f"Traceback (most recent call last):\n{frames}ValueError: {names[-1]}\n"
        named = Outcome(
            outcome.status, outcome.trace,
            tuple(CandidateOut(c.data, c.trace, c.kind, c.bound,
                               c.detail + traceback if c.kind is not ExitKind.OK else c.detail)
                  for c in outcome.candidates),
            outcome.wall_s, outcome.cpu_s, outcome.solver_s, outcome.execs,
            outcome.error + (traceback if outcome.status is not ExitKind.OK else ""),
            stats, tuple(outcome.tokens) + tuple(n.encode() for n in names))
        result, frame, logs = _assemble(task, named)
        decoded = decode_result(frame, DEFAULT_LIMITS)  # raises RemoteProtocolError if refused
        assert not [e for e in logs if e["event"] == "result.unsendable"], logs
        assert decoded.status is result.status and len(decoded.candidates) == len(result.candidates)
        assert len(decoded.stats) <= MAX_INFO_KEYS and all(is_key(k) for k in decoded.stats)
        if result.error:  # a long traceback is cut, its innermost frame and exception line kept
            assert decoded.error.endswith(result.error[-200:])


@settings(max_examples=10, deadline=None)
@given(module=st.one_of(_IDENT, st.lists(_IDENT, min_size=2, max_size=5).map(" ".join),
                        st.text(_LETTERS.filter(lambda c: c != "."), min_size=60, max_size=200)),
       functions=st.lists(NAMES, min_size=1, max_size=6, unique=True))
def test_the_engine_names_generated_library_functions_validly(tmp_path_factory, module, functions):
    """The real engine, in process, on a target whose "C" helper module and functions carry the
    generated names: its counters name them, and the result is sent and decodes unchanged."""
    stem = "gen_" + hashlib.sha256(repr((module, functions)).encode()).hexdigest()[:16]
    module += stem  # the engine keeps one model per module name and process: one per example
    helper = types.ModuleType(module)
    for name in functions:
        setattr(helper, name, zlib.crc32)
    sys.modules[module] = helper
    folder = tmp_path_factory.mktemp(stem)
    calls = "\n".join(f"    total ^= getattr(lib, {name!r})(data[:{i + 1}])"
                      for i, name in enumerate(functions))
    (folder / f"{stem}.py").write_text(
        f"lib = __import__({module!r})\n\n\ndef target(data):\n    total = 0\n{calls}\n"
        "    if total == 7:\n        raise ValueError(total)\n")
    sys.path.insert(0, str(folder))
    try:
        from symfence.worker.concolic.engine import ConcolicEngine

        task = _task(b"abcdef", f"{stem}:target", exec_timeout_s=1.0, confirm_findings=False)
        outcome = ConcolicEngine().run_task(task)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(module, None)
    assert outcome.status is ExitKind.OK, outcome.error
    wrapped = [f for f in functions if not f.startswith("_")]  # the model wraps public functions only
    assert outcome.stats.get("concretisations", 0) >= len(wrapped)
    result, frame, logs = _assemble(task, outcome)
    decoded = decode_result(frame)
    assert not logs and decoded.status is ExitKind.OK
    assert dict(decoded.stats) == dict(outcome.stats)  # made valid by the engine itself, kept as made
