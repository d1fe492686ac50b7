"""The long-lived fuzz process (worker/executors/fuzz.py + worker/fuzz/live_child.py), real Atheris:
it survives a native crash (restart, corpus kept, the crash reported once) and a corpus entry
the coordinator sends while it runs is executed by that same process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import zlib

import pytest
import structlog.testing

from symfence.protocol.fuzzslice import SliceSpec, pack_spec
from symfence.worker.executors import fuzz as fuzz_executor
from symfence.worker.executors.base import ExitKind, Task
from symfence.worker.executors.fuzz import FuzzExecutor
from tests import fuzzproc_targets
from tests.fuzzproc_inputs import CRASHER, ENGINE_FIND, PY_CRASHER

TARGET = "tests.fuzzproc_targets:marker"


def _turn(ex: FuzzExecutor, entries=(), *, slice_s: float = 2.0, tokens=(), limit_s: float = 120.0,
          target: str = TARGET, exec_timeout_s: float = 0.5):
    ex.start(Task("t" * 64, "w" * 64, pack_spec(SliceSpec(tuple(entries), tuple(tokens))), target, 1,
                  {"slice_s": slice_s, "exec_timeout_s": exec_timeout_s}))
    deadline = time.monotonic() + limit_s
    while (outcome := ex.wait(0.05)) is None:
        assert time.monotonic() < deadline, "the turn did not end"
    return outcome


def test_the_target_holds_the_checksums_of_the_planted_inputs():
    # (not the inputs: the fuzz process would hand them to libFuzzer in its dictionary)
    assert fuzzproc_targets._FIND_CRC == zlib.crc32(ENGINE_FIND)
    assert fuzzproc_targets._PY_CRC == zlib.crc32(PY_CRASHER)
    assert fuzzproc_targets._CRASH_CRC == (zlib.crc32(CRASHER + b"1"), zlib.crc32(CRASHER + b"2"))


def _pid(ex: FuzzExecutor) -> int:
    (live,) = ex._lives.values()
    assert live.proc is not None and live.proc.returncode is None
    return live.proc.pid


def test_a_noisy_target_that_ends_its_process_neither_fills_the_disk_nor_loops(tmp_path):
    """One target with two habits of real code. It writes ~200 bytes to stdout/stderr at every
    execution (a `logging` warning, a print, a C library's write to fd 2): the process's log stays
    small (libFuzzer's -close_fd_mask=3; its own report of a native crash still reaches the log,
    the next test). And it ends its process (os._exit) on a corpus entry (worker/target_exit.py):
    before, the process died without an artifact and again at every restart, on loading the same
    entry (650 executions in a 20 s campaign); now that entry is a crash and fuzzing goes on."""
    ex = FuzzExecutor(workdir=str(tmp_path))
    try:
        ex.start(Task("t" * 64, "w" * 64, pack_spec(SliceSpec((b"Xabc", b"hello"), (b"BUG",))),
                      "tests.fuzzproc_targets:noisy_exits", 1, {"slice_s": 3.0, "exec_timeout_s": 0.5}))
        deadline = time.monotonic() + 120
        while (outcome := ex.wait(0.05)) is None:
            assert time.monotonic() < deadline, "the turn did not end"
        (live,) = ex._lives.values()
        size = live.log.stat().st_size
    finally:
        ex.close()
    # ~200 bytes an execution would be 200 KB after 1,000. The turn can end at its first second (a new
    # find ends it early: 3,822 executions there on a loaded machine), so the floor is 1,000, not more.
    assert outcome.status is ExitKind.OK and outcome.execs > 1000, outcome
    assert size < 64 << 10, f"{size} bytes of log after {outcome.execs} executions"  # was ~200 per execution
    crashes = {c.data[:3]: c.detail for c in outcome.candidates if c.kind is ExitKind.CRASH}
    assert outcome.stats["fuzz_restarts"] == 0, outcome
    assert b"Xab" in crashes and "TargetExited: the target ended its process: os._exit(3)" in crashes[b"Xab"]
    assert 'fuzzproc_targets.py", line' in crashes[b"Xab"] and "in noisy_exits" in crashes[b"Xab"]  # the call
    assert any(k.startswith(b"BUG") for k in crashes)  # and it went on fuzzing


def test_after_its_hang_the_process_cuts_long_executions_short(tmp_path, monkeypatch):
    """Once the process has hung on an input (reported once), another input that runs long would
    not be reported and cost the whole time-out: it is cut at 10x the slowest execution that
    completed (at least 20 ms). Before, an input one mutation from a corpus entry that hangs
    (a loop behind one compared byte) cost a second each: 4 executions in a 4 s turn."""
    log = tmp_path / "hang.log"
    monkeypatch.setenv("FUZZPROC_HANG_LOG", str(log))
    ex = FuzzExecutor(workdir=str(tmp_path))
    candidates = []
    try:
        for seeds in ((b"H1", b"ok"), (b"H22", b"H333", b"ok2")):  # the hang ends the first turn early
            ex.start(Task("t" * 64, "w" * 64, pack_spec(SliceSpec(seeds, ())), "tests.fuzzproc_targets:hangs",
                          1, {"slice_s": 2.0, "exec_timeout_s": 0.5}))
            deadline = time.monotonic() + 120
            while (outcome := ex.wait(0.05)) is None:
                assert time.monotonic() < deadline, "the turn did not end"
            candidates += outcome.candidates
    finally:
        ex.close()
    ran = sorted(float(line) for line in log.read_text().split())
    # The first hang ran its time-out (0.5 s of CPU), or near it: on a loaded machine the parent's
    # wall-clock watchdog (4 x time-out + 2 s without progress) can end it first (0.37 s seen in
    # CI with three test workers on two cores). Later seeds ran too, each cut far shorter.
    assert ran[-1] >= 0.25 and len(ran) >= 3, ran
    assert ran[-2] < 0.15, ran  # every later one was cut (CPU seconds: load does not stretch them)
    hangs = [c for c in candidates if c.kind is ExitKind.HANG]
    assert len(hangs) == 1 and hangs[0].data[:1] == b"H", candidates


def test_a_second_loop_in_another_function_is_still_found_after_the_first(tmp_path):
    """Executions are cut short once the process has hung; one cut in a function where no hang
    was recorded yet is run again with the whole time-out, so a second loop is reported too."""
    ex = FuzzExecutor(workdir=str(tmp_path))
    candidates = []
    try:
        for seeds in ((b"H1", b"K1", b"ok"), (), ()):  # a find ends a turn early: the rest run on
            ex.start(Task("t" * 64, "w" * 64, pack_spec(SliceSpec(seeds, ())),
                          "tests.fuzzproc_targets:two_loops", 1, {"slice_s": 1.5, "exec_timeout_s": 0.3}))
            deadline = time.monotonic() + 120
            while (outcome := ex.wait(0.05)) is None:
                assert time.monotonic() < deadline, "the turn did not end"
            candidates += [c for c in outcome.candidates if c.kind is ExitKind.HANG]
    finally:
        ex.close()
    assert sorted(c.data[:1] for c in candidates) == [b"H", b"K"], candidates
    assert any("_spin_b" in c.detail for c in candidates), [c.detail for c in candidates]


def test_an_input_past_the_memory_limit_is_a_memory_error_not_a_restart(tmp_path):
    """The process may grow by -rss_limit_mb at most (its address space, as the engine's and the
    replays' are limited): an input past it raises MemoryError, a finding like any exception, and
    the process goes on. Before, libFuzzer's once-a-second check of the peak RSS ended the process
    (blaming whatever input ran then: the empty input once), so every such input one mutation away
    cost a restart and seconds of filling memory: 0-5,000 executions per 2 s turn against ~200,000.
    libFuzzer's own check is off: it reads the peak RSS, which a child inherits from its parent,
    so a parent past the limit (this test process after 400 MB, a big worker rank) had every fuzz
    process ended a second after its start (CI saw "used: 502Mb; limit: 300Mb" on b"M")."""
    high_water = bytearray(400 << 20)
    high_water[::4096] = b"x" * len(range(0, 400 << 20, 4096))
    del high_water
    ex = FuzzExecutor(workdir=str(tmp_path))
    candidates, restarts = [], 0
    try:
        for seeds in ((b"M", b"ok"), (b"M2",)):
            ex.start(Task("t" * 64, "w" * 64, pack_spec(SliceSpec(seeds, ())),
                          "tests.fuzzproc_targets:allocates", 1,
                          {"slice_s": 1.5, "exec_timeout_s": 1.0, "rss_limit_mb": 300}))
            deadline = time.monotonic() + 120
            while (outcome := ex.wait(0.05)) is None:
                assert time.monotonic() < deadline, "the turn did not end"
            candidates += [c for c in outcome.candidates if c.kind is not ExitKind.OK]
            restarts += outcome.stats["fuzz_restarts"]
    finally:
        ex.close()
    assert restarts == 0, candidates
    assert len(candidates) == 1 and candidates[0].data[:1] == b"M", candidates
    detail = candidates[0].detail
    assert "MemoryError" in detail and "in allocates" in detail, detail


def test_the_tracer_runs_inputs_under_the_memory_limit_of_the_replays():
    """The tracer measures what the fuzz process kept, which includes an input that raised
    MemoryError there; without the limit it filled the memory (3 GiB, seconds), ran past its
    time-out and was claimed as a hang, which the confirming replay (limited) saw as a crash."""
    from symfence.worker.realtrace.client import TraceClient

    client = TraceClient()
    try:
        client.submit("tests.fuzzproc_targets:allocates", [], 5.0, [b"ok", b"M"], memory_limit_mb=300)
        deadline = time.monotonic() + 60
        while (traced := client.poll(0.1)) is None:
            assert time.monotonic() < deadline, "the batch was not traced"
    finally:
        client.close()
    assert [t.status for t in traced] == ["ok", "crash"] and "MemoryError" in traced[1].detail, traced


def test_an_input_that_ends_the_process_below_python_is_named_by_the_shared_record(tmp_path):
    """C's _exit leaves neither libFuzzer's artifact nor a Python exception: the parent reads the
    input the target was running from the file both map, reports it once as a crash and drops it
    from the corpus, so the restart loads the corpus without dying again."""
    ex = FuzzExecutor(workdir=str(tmp_path))
    try:
        turns = [_turn_of(ex, "tests.fuzzproc_targets:c_exit", (b"Xabc", b"hello"), (b"BUG",))]
        turns.append(_turn_of(ex, "tests.fuzzproc_targets:c_exit"))
    finally:
        ex.close()
    crashes = [c for t in turns for c in t.candidates if c.kind is ExitKind.CRASH]
    ended = [c for c in crashes if "ProcessEnded" in c.detail]
    assert len(ended) == 1 and ended[0].data == b"Xabc", crashes
    assert "exited with status 5 inside the target" in ended[0].detail
    assert sum(t.stats["fuzz_restarts"] for t in turns) <= 1, [t.stats for t in turns]  # no restart loop
    assert any(c.data.startswith(b"BUG") for c in crashes) and turns[-1].execs > 1000


def _turn_of(ex: FuzzExecutor, target: str, entries=(), tokens=(), slice_s: float = 2.0):
    ex.start(Task("t" * 64, "w" * 64, pack_spec(SliceSpec(tuple(entries), tuple(tokens))), target, 1,
                  {"slice_s": slice_s, "exec_timeout_s": 0.5}))
    deadline = time.monotonic() + 120
    while (outcome := ex.wait(0.05)) is None:
        assert time.monotonic() < deadline, "the turn did not end"
    return outcome


def test_native_crash_restarts_only_the_process_and_loses_nothing(tmp_path):
    ex = FuzzExecutor(workdir=str(tmp_path))
    try:
        seeds = [b"abc", b"xyz", b"hello"]
        first = _turn(ex, seeds)
        assert first.status is ExitKind.OK and first.execs > 0
        (live,) = ex._lives.values()
        before = {p.name for p in live.corpus.iterdir()}
        pid = _pid(ex)
        # Both crashers die the same way. The first crash ends the process and, a new stack, cuts
        # the turn short (after 1 s); the process starts again within the turn or at the next.
        turns = [_turn(ex, [CRASHER + b"1", CRASHER + b"2"], slice_s=3.0)] + [_turn(ex) for _ in range(2)]
        native = [c for t in turns for c in t.candidates
                  if c.kind is ExitKind.CRASH and "NativeCrash" in c.detail]
        assert len(native) == 1 and native[0].data[:4] == CRASHER, native  # once per stack
        assert "in marker" in native[0].detail  # the Python stack of the crash
        assert sum(t.stats["fuzz_restarts"] + t.stats["fuzz_runs"] for t in turns) >= 1 and _pid(ex) != pid
        after = {p.name for p in live.corpus.iterdir()}
        assert before <= after  # the corpus survived the restart; the crashers left it
        assert not any(open(live.corpus / n, "rb").read()[:4] == CRASHER for n in after)
        later = _turn(ex)
        assert later.execs > 0 and later.stats["fuzz_runs"] == 0  # the same process went on
        assert not [c for c in later.candidates if c.kind is ExitKind.CRASH]  # not reported again
    finally:
        ex.close()


def test_an_engine_entry_reaches_the_running_process(tmp_path, monkeypatch):
    marker = tmp_path / "marker"
    monkeypatch.setenv("SYMFENCE_TEST_MARKER", str(marker))
    ex = FuzzExecutor(workdir=str(tmp_path))
    try:
        assert _turn(ex, [b"abc"]).execs > 0
        pid = _pid(ex)
        assert not marker.exists()
        second = _turn(ex, [ENGINE_FIND], slice_s=3.0)
        assert second.stats["fuzz_runs"] == 0 and _pid(ex) == pid  # no new process ...
        assert set(marker.read_text().split()) == {str(pid)}  # ... and that one ran the entry
        kept = {c.data for c in second.candidates if c.kind is ExitKind.OK}
        assert ENGINE_FIND not in kept  # it came from the campaign: not reported back as a find
    finally:
        ex.close()


def test_new_dictionary_tokens_restart_the_process_with_them(tmp_path, monkeypatch):
    monkeypatch.setattr(fuzz_executor, "_DICT_RESTART_COST", 1.0)  # any start-up is cheap enough here
    ex = FuzzExecutor(workdir=str(tmp_path))
    try:
        _turn(ex, [b"abc"], tokens=[b"KW0"])
        few = _turn(ex, tokens=[b"KW%d" % i for i in range(1, 8)])  # 7 new: not yet worth a restart
        assert few.stats["fuzz_runs"] == 0
        more = _turn(ex, tokens=[b"KW8"])
        assert more.stats["fuzz_runs"] == 1 and more.execs > 0
        (live,) = ex._lives.values()
        log = live.log.read_text()
        ours = re.findall(r"symfence: (\d+) dictionary tokens from the code under test", log)  # libdict.py
        assert f"Dictionary: {9 + int(ours[-1] if ours else 0)} entries" in log  # libFuzzer read them all
        assert _turn(ex).stats["fuzz_runs"] == 0
    finally:
        ex.close()


def test_a_stopped_process_burns_no_cpu_and_resumes(tmp_path):
    """Between turns the core is the engine's: the process is stopped, not killed."""
    ex = FuzzExecutor(workdir=str(tmp_path))
    try:
        _turn(ex, [b"abc"])
        ex.pause()  # (the wrapper's call once the turn's inputs are traced)
        pid = _pid(ex)
        deadline = time.monotonic() + 2.0  # SIGSTOP takes effect when the kernel next sees it
        while _state(pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(pid) == "T"  # stopped
        cpu = fuzz_executor._cpu_s(pid)
        time.sleep(1.5)  # longer than any libFuzzer wall-clock timer would allow, were it on
        assert fuzz_executor._cpu_s(pid) == cpu  # no CPU while stopped: the core is the engine's
        resumed = _turn(ex)
        assert resumed.execs > 0 and _pid(ex) == pid and resumed.stats["fuzz_runs"] == 0
        assert not [c for c in resumed.candidates if c.kind is not ExitKind.OK]
    finally:
        ex.close()
    assert not os.path.exists(f"/proc/{pid}") or _state(pid) == "Z"  # close() ended it


def test_the_process_runs_on_while_its_kept_inputs_are_traced(tmp_path):
    """After a turn that kept inputs the process goes on fuzzing (the real tracer measures
    those inputs meanwhile: the core has room for both); what it runs then is in the next
    answer, and the executor the worker uses stops it once the tracing is done."""
    ex = FuzzExecutor(workdir=str(tmp_path))
    try:
        first = _turn(ex, [b"abc"])
        assert first.stats["fuzz_kept"] > 0
        pid = _pid(ex)
        (live,) = ex._lives.values()
        count = live.count()
        time.sleep(0.5)
        assert live.count() > count and _state(pid) != "T"  # running on
        ex.pause()
        deadline = time.monotonic() + 2.0
        while _state(pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(pid) == "T"
        ran_on = live.count() - count
        second = _turn(ex, slice_s=0.5)
        assert second.execs >= ran_on > 0  # its executions after the answer are counted
    finally:
        ex.close()
    traced = fuzz_executor.executor()  # the worker's executor: the real tracer around the turns
    try:
        traced.start(Task("t" * 64, "w" * 64, pack_spec(SliceSpec((b"abc",), ())), TARGET, 1,
                          {"slice_s": 2.0, "exec_timeout_s": 0.5}))
        deadline = time.monotonic() + 120
        while (outcome := traced.wait(0.05)) is None:
            assert time.monotonic() < deadline, "the turn did not end"
        assert outcome.stats["fuzz_kept"] > 0 and outcome.stats["trace_execs"] > 0
        (live,) = traced.inner._lives.values()
        assert live.proc is not None
        deadline = time.monotonic() + 2.0
        while _state(live.proc.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(live.proc.pid) == "T"  # stopped once its inputs were traced
    finally:
        traced.close()


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def test_the_yardstick_sees_the_whole_library_a_harness_imports_from():
    """`from markdown_it import MarkdownIt`: the tracer that measures the fuzz stage's inputs
    covers the whole markdown_it package, not only the module defining MarkdownIt (inputs that
    reach only the other modules would otherwise count as nothing new and be dropped)."""
    from symfence.worker.realtrace.tracer import ArcTracer, default_include, load_callable

    module, fn = load_callable("examples.harnesses.fuzz_markdown_it:TestOneInput")
    roots = default_include(module)
    package = os.path.dirname(module.MarkdownIt.__init__.__code__.co_filename) + os.sep
    assert package in roots, roots
    trace = ArcTracer(roots).run(fn, b"\x01# title\n\n- a\n- *b*\n", 2.0).trace
    plain = ArcTracer([r for r in roots if r != package]).run(fn, b"\x01# title\n\n- a\n- *b*\n", 2.0).trace
    assert len(trace) > 2 * len(plain)  # the block and inline rules live in other modules


def test_a_turn_ended_early_answers_with_its_work_and_the_process_goes_on(tmp_path):
    """end_turn (a confirmation waits on this worker): the turn answers at its next wait with the
    executions it ran, as a normal outcome, long before its slice; the next turn resumes the same
    process (nothing restarted, nothing lost)."""
    ex = FuzzExecutor(workdir=str(tmp_path))
    try:
        assert _turn(ex, [b"abc"]).execs > 0
        pid = _pid(ex)
        ex.start(Task("t" * 64, "w" * 64, pack_spec(SliceSpec((), ())), TARGET, 1,
                      {"slice_s": 600.0, "exec_timeout_s": 0.5}))
        assert ex.wait(0.5) is None  # running: a 600 s slice
        assert ex.end_turn()
        deadline = time.monotonic() + 60  # (the test fails here rather than wait out the slice)
        while (outcome := ex.wait(0.05)) is None:
            assert time.monotonic() < deadline, "the turn did not end early"
        assert outcome.status is ExitKind.OK and outcome.execs > 0 and outcome.stats["fuzz_runs"] == 0
        assert not ex.end_turn()  # no turn running now
        assert _turn(ex).execs > 0 and _pid(ex) == pid  # the same process goes on
    finally:
        ex.close()


def test_a_new_find_ends_the_turn_early(tmp_path):
    """A Python crash of a new signature answers its turn after the turn's first second, not at
    the end of its 600 s slice; the next turn does not report it again."""
    ex = FuzzExecutor(workdir=str(tmp_path))
    try:
        assert _turn(ex, [b"abc"]).execs > 0
        found = _turn(ex, [PY_CRASHER], slice_s=600.0, limit_s=60.0)
        crashes = [c for c in found.candidates if c.kind is ExitKind.CRASH]
        assert [c.data for c in crashes] == [PY_CRASHER] and "planted behind a checksum" in crashes[0].detail
        assert found.wall_s >= 1.0  # a cut turn still runs its first second
        later = _turn(ex, [PY_CRASHER + b"\x00"], slice_s=1.0)
        assert not [c for c in later.candidates if c.kind is ExitKind.CRASH]
    finally:
        ex.close()


def test_a_module_of_the_library_imported_while_fuzzing_is_instrumented(tmp_path, monkeypatch):
    # plugfmt imports its plugins on the first load() (as Pillow's Image.open does), after the
    # harness's instrument_imports() block: the TAG plugin's comparisons still guide libFuzzer
    # to the bug behind them ("TAG", 0x7f, "v2") from a seed its magic accepts
    libtargets = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                              "libtargets")
    path = [libtargets, os.environ.get("PYTHONPATH")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, path)))
    found = _crash_within_turns(tmp_path, "fuzz_plugfmt:TestOneInput", b"TAG\x00\x00\x00", "TagPluginBug")
    assert found and found[0].data[:6] == b"TAG\x7fv2", "libFuzzer did not reach the plugin's bug"


def _crash_within_turns(tmp_path, target: str, seed: bytes, marker: str, turns: int = 6, **options) -> list:
    """Up to `turns` 5 s turns of one fuzz process on `target` from `seed` (more task `options`),
    until it reports a crash whose detail names `marker`: those crashes (none: libFuzzer did not
    get there)."""
    ex = FuzzExecutor(workdir=str(tmp_path))
    try:
        found: list = []
        for _ in range(turns):
            ex.start(Task("t" * 64, "w" * 64, pack_spec(SliceSpec((seed,), ())), target, 1,
                          {"slice_s": 5.0, "exec_timeout_s": 0.5, **options}))
            deadline = time.monotonic() + 120
            while (outcome := ex.wait(0.05)) is None:
                assert time.monotonic() < deadline, "the turn did not end"
            found += [c for c in outcome.candidates if c.kind is ExitKind.CRASH and marker in c.detail]
            if found:
                break
        return found
    finally:
        ex.close()


@pytest.mark.parametrize("harness", ["fuzz_preloaded", "fuzz_preloaded_all"])
def test_a_library_imported_before_the_harness_is_instrumented(tmp_path, monkeypatch, harness):
    # The test's sitecustomize imports preloaded_lib at start-up, as Atheris imports ipaddress:
    # instrument_imports() passes over a module already loaded, and the fuzz process used to make
    # the harness's instrument_all() a no-op, so libFuzzer had no coverage of the library.
    preload = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preload")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import preloaded_lib\n")
    path = os.pathsep.join(filter(None, [str(site), preload, os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    loaded = subprocess.run([sys.executable, "-c", "import sys; print('preloaded_lib' in sys.modules)"],
                            capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "True", "the premise: the library is loaded before any harness"
    found = _crash_within_turns(tmp_path, f"{harness}:TestOneInput", b"\x00" * 6, "PreloadedBug")
    assert found and found[0].data[:6] == b"PRELOD", "libFuzzer had no coverage of the preloaded library"


def _with_libdict_targets(monkeypatch) -> None:
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libdict")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))


def test_a_word_of_the_librarys_table_reaches_libfuzzer(tmp_path, monkeypatch):
    # kwlib looks its commands up in a dict: no comparison Atheris reports, and 15 exact bytes
    # libFuzzer does not guess (without library_dict no crash in 6 turns, checked by hand). The
    # fuzz process reads the table's words into its -dict (worker/fuzz/libdict.py).
    _with_libdict_targets(monkeypatch)
    with structlog.testing.capture_logs() as logs:
        found = _crash_within_turns(tmp_path, "fuzz_kwlib:TestOneInput", b"help", "KeywordBug")
    assert found and found[0].data.startswith(b"xylophonic-mode"), "the table's word did not reach libFuzzer"
    started = [e for e in logs if e["event"] == "fuzz.library_dict"]
    assert started and started[0]["tokens"] >= 3 and started[0]["run"] == 1  # the table's three words


def test_a_recursion_is_recorded_once_wherever_it_hit_the_limit(tmp_path):
    """Five corpus entries nest through one recursive descent in different orders, so the limit
    hits at different lines: one finding, not one per line (each went to the coordinator to be
    replayed and found the same bug)."""
    import random

    rng = random.Random(7)
    entries = tuple(b"x" + bytes(rng.choice(b"([") for _ in range(3000)) for _ in range(5))
    ex = FuzzExecutor(workdir=str(tmp_path))
    recursions: list = []
    try:
        for turn_entries in (entries, (), (), ()):  # a loaded machine may not reach one in the first turn
            outcome = _turn(ex, turn_entries, slice_s=1.0, target="tests.triage_targets:layered_target",
                            exec_timeout_s=2.0)
            recursions += [c for c in outcome.candidates
                           if c.kind is ExitKind.CRASH and "RecursionError" in c.detail]
            if recursions:
                outcome = _turn(ex, (), slice_s=1.0, target="tests.triage_targets:layered_target",
                                exec_timeout_s=2.0)  # one more turn: the other seeds hit the limit too
                recursions += [c for c in outcome.candidates
                               if c.kind is ExitKind.CRASH and "RecursionError" in c.detail]
                break
    finally:
        ex.close()
    assert len(recursions) == 1, [c.detail[-300:] for c in recursions]


def test_an_execution_slow_from_the_modules_it_imports_first_is_no_hang(tmp_path):
    """The first execution that imports a big part of a library (and instruments it) may pass the
    time-out on the imports alone: it runs once more, warm, and only a real hang is reported.
    Before, docutils' first parse was claimed as a hang of the empty input on every campaign
    (never confirmed, and the input left the corpus)."""
    ex = FuzzExecutor(workdir=str(tmp_path))
    candidates = []
    try:
        # the first turn imports (0.6 s of CPU); the H seed's hang comes in this turn or a later one
        # (a loaded machine gives a 1.5 s turn less CPU than the hang needs: once in CI)
        for seeds in ((b"ok",), (b"H1",), (), (), (), ()):
            outcome = _turn(ex, seeds, slice_s=1.5, target="tests.fuzzproc_targets:slow_first_use",
                            exec_timeout_s=0.3)
            candidates += [c for c in outcome.candidates if c.kind is ExitKind.HANG]
            if candidates:
                break
    finally:
        ex.close()
    assert [c.data[:1] for c in candidates] == [b"H"], [(c.data, c.detail) for c in candidates]


def test_a_first_start_ended_early_answers_and_goes_on_importing_at_the_next_turn(tmp_path):
    """The worker ends a first turn whose process is still importing (an engine task waits):
    it answers within about a second, with no execution, instead of once the import is done
    (soupsieve's harness with instrument_all() took 20 s, and the engine waited on both
    workers); the next turns resume the same process, which then fuzzes."""
    slow = "tests.fuzzproc_slow_start:TestOneInput"
    ex = FuzzExecutor(workdir=str(tmp_path))
    try:
        ex.start(Task("t" * 64, "w" * 64, pack_spec(SliceSpec((), ())), slow, 1,
                      {"slice_s": 600.0, "exec_timeout_s": 0.5}))
        assert ex.wait(0.3) is None
        asked = time.monotonic()
        assert ex.end_turn()
        while (outcome := ex.wait(0.05)) is None:
            assert time.monotonic() - asked < 3.0, "the first start was not ended early"
        assert outcome.status is ExitKind.OK and outcome.execs == 0, outcome
        pid = _pid(ex)
        execs = 0
        for _ in range(60):  # 2 s turns until the import is done (4 s of CPU, more on a loaded machine)
            execs = _turn(ex, target=slow).execs
            if execs:
                break
        assert execs > 0 and _pid(ex) == pid  # the same process, never restarted
    finally:
        ex.close()
