"""Crash and hang identity on the cases real harnesses hit (docs/triage.md, "Crash identity"):
each case is a pair of real runs of tests/triage_targets.py, either two bugs (two identities) or
one bug reached twice (one). Identities are taken as the campaign takes them: from the detail a
fresh plain process prints (worker/concolic/replay.py, what a confirmation's detail is), and
checked equal to the in-process exception's (the minimizer's) where there is one."""

from __future__ import annotations

import os
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from symfence.protocol.crashid import identity_from_detail
from symfence.protocol.messages import RERUN_BOUND, Candidate, Result, Status
from symfence.protocol.pycrash import (
    HANG_STACK_MARK,
    HANG_TYPE,
    code_under_test,
    compact_traceback,
    identity_from_python_exception,
)
from symfence.protocol.rules import DEFAULT_LIMITS, fit_text
from symfence.worker.concolic.replay import Verdict, replay_plain
from symfence.worker.engine_api import ExitKind, Task
from symfence.worker.executors import make_executor
from symfence.worker.sender import fit
from tests import triage_targets

MOD = "tests.triage_targets"


def _plain(fn: str, data: bytes, timeout_s: float = 5.0) -> tuple[Verdict, str]:
    r = replay_plain(f"{MOD}:{fn}", data, timeout_s)
    return r.verdict, r.detail


def ident(fn: str, data: bytes) -> str:
    """The identity of a crash both ways: plain process's detail, and the exception in process."""
    verdict, detail = _plain(fn, data)
    assert verdict is Verdict.CRASHED, (fn, data, detail)
    key = identity_from_detail(detail, f"{MOD}:{fn}").key
    try:
        getattr(triage_targets, fn)(data)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too
        assert identity_from_python_exception(exc, f"{MOD}:{fn}").key == key, detail
    return key


def test_stdlib_code_under_test_behind_a_harness_keeps_two_bugs_two():
    # urllib.parse is in the standard library, the harness is not: its frames count since the
    # harness imports it (what coverage.include measures by default)
    assert "~urllib.parse" in code_under_test(f"{MOD}:url_target")  # imported: when the harness calls it
    a, b = ident("url_target", b"http://[::1"), ident("url_target", b"http://h:99999999")
    assert a == "ValueError @ parse.urlsplit > triage_targets.url_target"
    assert b == "ValueError @ parse.port > triage_targets.url_target"
    assert ident("url_target", b"https://[zz") == a  # the same bug again


def test_a_library_between_harness_and_stdlib_is_the_code_under_test():
    # the harness imports json for itself; the library's two json.loads calls are two bugs (not
    # both 'JSONDecodeError @ decoder.raw_decode > decoder.decode > json.loads')
    config, state = ident("library_target", b"c{"), ident("library_target", b"s {")
    assert config == "JSONDecodeError @ triage_lib.load_config > triage_targets.library_target"
    assert state == "JSONDecodeError @ triage_lib.load_state > triage_targets.library_target"


def _traceback(frames: list[tuple[str, str]], error: str) -> str:
    lines = ["Traceback (most recent call last):"]
    lines += [f'  File "{path}", line {n}, in {func}\n    x()' for n, (path, func) in enumerate(frames, 1)]
    return "\n".join([*lines, error])


@pytest.mark.parametrize("where", ["purelib", "platlib", "debian"])
def test_an_installed_library_is_the_code_under_test_not_the_standard_library(where):
    # Where pip installs a library (a venv's site-packages sits inside its lib/python3.X/, which
    # sysconfig names the standard library's folder too), or Debian's dist-packages: the
    # library's frames make the identity, so two places it raises are two bugs, not one
    # 'IndexError @ fuzz_lib.TestOneInput' for every IndexError of the package.
    import sysconfig

    folder = (os.path.join(sysconfig.get_paths()["stdlib"], "..", "python3", "dist-packages")
              if where == "debian" else sysconfig.get_paths()[where])
    lib = os.path.join(os.path.abspath(folder), "somelib")
    harness = ("/src/fuzz_lib.py", "TestOneInput")
    target = "fuzz_lib:TestOneInput"
    one = _traceback([harness, (f"{lib}/decoder.py", "loads")], "IndexError: list index out of range")
    two = _traceback([harness, (f"{lib}/decoder.py", "loads"), (f"{lib}/decoder.py", "load_line")],
                     "IndexError: list index out of range")
    keys = {identity_from_detail(d, target, None, code_under_test(target)).key for d in (one, two)}
    assert keys == {"IndexError @ decoder.loads > fuzz_lib.TestOneInput",
                    "IndexError @ decoder.load_line > decoder.loads > fuzz_lib.TestOneInput"}


def test_code_under_test_comes_from_the_campaign_options_and_the_harness():
    demo = "examples.parsers.wave_header:target"
    assert "wave" in code_under_test(demo)  # the harness imports it (and lists it in MODULES)
    assert "wave" in code_under_test(demo, {"instrument": "wave", "cov_include": "examples"})
    # an explicit coverage.include replaces the harness's imports; concolic.instrument adds to it
    only = code_under_test(f"{MOD}:url_target", {"cov_include": "tests", "instrument": "json"})
    assert "json" in only and not any("urllib" in m for m in only)
    import xml.dom.minidom

    path = xml.dom.minidom.__file__
    assert "xml.dom.minidom" in code_under_test("x:y", {"cov_include": path})  # a stdlib path: its module


def test_chained_exceptions_are_told_apart_by_their_root_cause():
    one, two, again = (ident("chained_target", d) for d in (b"1", b"2", b"3"))
    assert one.startswith("RuntimeError<-IndexError @ triage_targets._first")
    assert two.startswith("RuntimeError<-KeyError @ triage_targets._second")
    assert again == one  # the same root cause by another path


def _at_depth(depth: int, fn: Any, data: bytes) -> BaseException:
    if depth:
        return _at_depth(depth - 1, fn, data)
    try:
        fn(data)
    except BaseException as exc:  # noqa: BLE001
        return exc
    raise AssertionError("no crash")


def test_recursion_error_is_its_cycle_whatever_the_depth_it_hit_the_limit_at():
    target = f"{MOD}:recursion_target"
    deep = b"[" * 5000
    keys = {identity_from_python_exception(_at_depth(d, triage_targets.recursion_target, deep), target).key
            for d in range(4)}  # the stack depth the harness is called at differs per context
    assert keys == {"RecursionError @ cycle:triage_targets._array > triage_targets.recursion_target"}
    plain = ident("recursion_target", deep)
    assert plain in keys
    other = ident("recursion_target", b"(" * 5000)
    assert other == "RecursionError @ cycle:triage_targets._group > triage_targets.recursion_target"
    # the detail a worker sends is cut to the wire's limit (head and tail kept): same identity
    _, detail = _plain("recursion_target", deep)
    assert identity_from_detail(fit_text(detail, 4000), target).key == plain


def _sent(detail: str, limit: int = 4000) -> str:
    """The detail as a worker sends it: its candidate made to keep the wire's rules (sender.fit)."""
    result = Result("0" * 64, "w", Status.OK, candidates=(Candidate(b"x", "0" * 64, detail=detail),))
    return fit(result, replace(DEFAULT_LIMITS, max_text_bytes=limit)).candidates[0].detail


def test_one_recursive_descent_is_one_bug_whichever_way_the_input_nests():
    # '[[[', '(((' and '[([(' nest through different functions of one parser with no depth
    # limit: one bug, known by where the recursion was entered, also from the detail a worker
    # sends (hundreds of frames, folded then cut to the wire's limit)
    target = f"{MOD}:nested_target"
    keys = set()
    for data in (b"[" * 3000, b"(" * 3000, b"[(" * 1500, b"[[(" * 1000, b"(" + b"[" * 2999):
        verdict, detail = _plain("nested_target", data)
        assert verdict is Verdict.CRASHED, detail
        sent = _sent(detail)
        assert len(sent) <= 4000 and ("frames repeated" in sent or "frames omitted" in sent), sent[:2000]
        keys.add(identity_from_detail(sent, target).key)
        keys.add(identity_from_detail(detail, target).key)
    assert keys == {"RecursionError @ cycle:triage_targets._expr > triage_targets.nested_target"}


def test_a_recursion_below_a_librarys_layers_is_one_bug_wherever_it_was_entered_and_cut():
    """The recursion starts below four frames of long lines, is entered at one of three functions
    of the grammar and nests by two paths in no fixed order, so nothing folds into one cycle. Cut
    to the wire's limit by bytes, the text kept ~500 characters of its head and a tail that began
    anywhere in a turn: the recursion was named by whichever frame came first after the cut, and
    one bug was 7 identities in 15 s on pycparser. Now the stack keeps whole frames of both ends
    (the layers too) and the recursion is named by the first of its repeating functions."""
    import random

    rng = random.Random(5)
    keys = set()
    for entry in (b"=", b"*", b"x"):
        for _ in range(3):
            data = entry + bytes(rng.choice(b"([") for _ in range(4000))
            verdict, detail = _plain("layered_target", data)
            assert verdict is Verdict.CRASHED, detail
            sent = _sent(detail)
            assert len(sent) <= 4000 and "frames omitted" in sent, sent[:3000]
            assert "characters cut" not in sent, sent[:3000]  # whole frames left out, no bytes cut
            assert "in _layer_four" in sent  # where the library's recursion began is still in it
            keys.add(identity_from_detail(sent, f"{MOD}:layered_target").key)
            keys.add(identity_from_detail(detail, f"{MOD}:layered_target").key)
    assert keys == {"RecursionError @ cycle:triage_targets._e_atom > triage_targets._layer_four"
                    " > triage_targets._layer_three"}


def test_compact_traceback_folds_cycles_and_leaves_other_text_alone():
    _, detail = _plain("recursion_target", b"[" * 5000)
    folded = compact_traceback(detail)
    assert len(folded) < 2000 < len(detail)
    assert re.search(r"^  \[Previous 2 frames repeated \d+ more times\]$", folded, re.M)
    assert folded.splitlines()[-1] == detail.splitlines()[-1]  # the exception line
    target = f"{MOD}:recursion_target"
    assert identity_from_detail(folded, target) == identity_from_detail(detail, target)
    _, short = _plain("url_target", b"http://[::1")
    assert compact_traceback(short) == short  # nothing repeats: unchanged
    assert compact_traceback("no frames at all\n" * 50) == "no frames at all\n" * 50


def test_two_assertions_of_one_harness_function_are_two_bugs():
    first, second = ident("assert_target", b"AA"), ident("assert_target", b"xB")
    assert first != second
    assert first.startswith("AssertionError @ triage_targets.assert_target#")
    assert ident("assert_target", b"Ax") == first  # the first check again


def test_systemexit_and_keyboardinterrupt_raised_by_the_target_are_crashes():
    assert ident("exit_target", b"x") == "SystemExit @ triage_targets.exit_target"
    assert ident("exit_target", b"k") == "KeyboardInterrupt @ triage_targets.exit_target"


@pytest.mark.parametrize("status", [0, 10, 11, 12, 3])
def test_a_target_that_ends_its_process_is_a_crash_at_its_call_whatever_the_status(status):
    """os._exit(0) once read as a clean run, 10 as a crash, 11 as a hang and 12 as a failed import
    (the replay's own exit codes); now each is a crash whose traceback names the call."""
    verdict, detail = _plain("hard_exit_target", bytes([status]))
    assert verdict is Verdict.CRASHED and f"os._exit({status})" in detail, detail
    assert identity_from_detail(detail, f"{MOD}:hard_exit_target").key == \
        "TargetExited @ triage_targets.hard_exit_target"


def test_the_line_coverage_of_inputs_that_end_the_process_is_still_reported(tmp_path):
    """symfence coverage and the benchmarks' replay (tools/linecov.py) run every input in one
    process: an input calling os._exit used to end it, and the report with it."""
    import json
    import subprocess
    import sys

    listing = tmp_path / "inputs.txt"
    paths = []
    for name, data in (("ends", b"\x03"), ("fine", b"")):  # (exit_target's b"x": sys.exit, the same)
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    listing.write_text("\n".join(paths))
    run = subprocess.run([sys.executable, "-m", "symfence.tools.linecov", f"{MOD}:hard_exit_target", "5",
                          str(listing), "--modules", MOD], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["lines"] > 0 and any("TargetExited" in sig for sig in report["exceptions"]), report


def test_a_package_file_that_is_not_python_3_is_left_out_of_the_line_count(tmp_path):
    """olefile ships a Python 2 ``olefile2.py``: coverage.py cannot parse it, and the whole report
    (``symfence coverage``, the benchmarks' yardstick) ended in ``NotPython``. It is left out now,
    and named."""
    import json
    import subprocess
    import sys

    (tmp_path / "sf_py2pkg").mkdir()
    (tmp_path / "sf_py2pkg" / "__init__.py").write_text("def parse(data):\n    if data[:1] == b'a':\n"
                                                      "        return 1\n    return 0\n")
    (tmp_path / "sf_py2pkg" / "old2.py").write_text("print 'python 2'\nx = 0x1FL\n")
    (tmp_path / "sf_py2_harness.py").write_text("import sf_py2pkg\n\ndef TestOneInput(data):\n"
                                                "    sf_py2pkg.parse(data)\n")
    (tmp_path / "a").write_bytes(b"a")
    listing = tmp_path / "inputs.txt"
    listing.write_text(str(tmp_path / "a"))
    html = tmp_path / "html"
    path = os.pathsep.join([str(tmp_path), str(Path(__file__).resolve().parent.parent)])
    run = subprocess.run([sys.executable, "-m", "symfence.tools.linecov", "sf_py2_harness:TestOneInput", "5",
                          str(listing), "--modules", "sf_py2pkg", "--html", str(html)], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": path})
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["lines"] == 3 and report["not_python"] == [str(tmp_path / "sf_py2pkg" / "old2.py")], report
    assert (html / "index.html").exists()


def test_a_process_the_target_forks_still_exits_as_it_asks():
    assert _plain("hard_exit_target", b"f") == (Verdict.RAN_FINE, "")


def test_exceptions_from_c_code_are_named_with_their_module():
    short = ident("c_errors_target", b"C12")
    bad_stream = ident("c_errors_target", b"C\x00\x00\x00\x05hello")
    assert short.startswith("struct.error @ triage_targets._chunk")
    assert bad_stream.startswith("zlib.error @ triage_targets._chunk")
    # a class raised in the module that defines it keeps its plain name (the names saved so far)
    assert ident("c_errors_target", b"E") == "RecordError @ triage_targets.c_errors_target"


def test_a_python_process_killed_in_c_code_is_named_by_its_python_frames():
    keys = []
    for data in (b"a", b"b", b"c"):
        verdict, detail = _plain("segv_target", data)
        assert verdict is Verdict.CRASHED and "Fatal Python error" in detail, detail
        keys.append(identity_from_detail(detail, f"{MOD}:segv_target").key)
    deref = "SIGSEGV @ ctypes.string_at > triage_targets._deref > triage_targets.segv_target"
    assert keys[0] == keys[1] == deref
    assert keys[2] == "SIGSEGV @ ctypes.string_at > triage_targets.segv_target"


def test_a_dump_of_all_threads_is_named_by_the_thread_the_signal_hit():
    """faulthandler with all_threads lists the other threads first (a helper thread's idle
    wait), the current thread after them: the crash is the current thread's."""
    dump = ("target process died (killed by SIGSEGV) while executing the input\n"
            "Fatal Python error: Segmentation fault\n\n"
            "Thread 0x00007f63555ea6c0 (most recent call first):\n"
            '  File "/x/threading.py", line 982 in run\n'
            '  File "/x/threading.py", line 1002 in _bootstrap\n\n'
            "Current thread 0x00007f6358e7ab80 (most recent call first):\n"
            '  File "/x/ctypes/__init__.py", line 519 in string_at\n'
            f'  File "{triage_targets.__file__}", line 194 in _deref\n'
            f'  File "{triage_targets.__file__}", line 199 in segv_target\n')
    assert identity_from_detail(dump, f"{MOD}:segv_target").key == \
        "SIGSEGV @ ctypes.string_at > triage_targets._deref > triage_targets.segv_target"


def _finish(ex: Any, limit_s: float = 60.0) -> Any:
    deadline = time.monotonic() + limit_s
    while (outcome := ex.wait(0.05)) is None:
        assert time.monotonic() < deadline, "no outcome"
    return outcome


def test_a_c_crash_is_named_by_its_stack_in_the_confirmation_and_the_minimizer(monkeypatch):
    """The campaign confirms a claim by running it again in the engine's child (executor
    "concolic", RERUN_BOUND), which the fatal signal kills: its detail carries faulthandler's
    dump from that child, so the identity is the plain replay's above. Before, the detail was
    "target process died (killed by SIGSEGV)" alone, and every C crash of a target was one bug
    ("target"). The minimizer runs such an input in a forked copy per candidate (before, the
    first run killed the minimizer: a task error, nothing minimized)."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent))  # tests. in the child
    target = f"{MOD}:segv_target"
    deref = "SIGSEGV @ ctypes.string_at > triage_targets._deref > triage_targets.segv_target"
    confirm, minimizer = make_executor("concolic"), make_executor("minimize")
    try:
        keys = []
        for data in (b"a", b"b", b"c"):
            confirm.start(Task("t" * 64, "w" * 64, data, target, RERUN_BOUND, {"exec_timeout_s": 2.0}))
            outcome = _finish(confirm)
            assert outcome.status is ExitKind.CRASH and "Fatal Python error" in outcome.error, outcome.error
            keys.append(identity_from_detail(outcome.error, target).key)
        assert keys == [deref, deref, "SIGSEGV @ ctypes.string_at > triage_targets.segv_target"]
        options = {"exec_timeout_s": 2.0, "minimize_kind": "crash", "minimize_executor": "concolic",
                   "minimize_budget_s": 20.0}
        minimizer.start(Task("t" * 64, "w" * 64, b"b" + b"noise" * 8, target, 0, options))
        outcome = _finish(minimizer)
        assert outcome.status is ExitKind.CRASH, outcome.error
        (cand,) = outcome.candidates
        assert cand.data == b"b" and identity_from_detail(cand.detail, target).key == deref, cand.detail
    finally:
        confirm.close()
        minimizer.close()


def test_hangs_have_an_identity_one_loop_one_two_loops_two():
    target = f"{MOD}:hang_target"
    keys = []
    for data in (b"s", b"S" * 40, b"t"):
        verdict, detail = _plain("hang_target", data, timeout_s=0.3)
        assert verdict is Verdict.HUNG, detail
        keys.append(identity_from_detail(detail, target, kind="hang"))
    spin, spin_again, stall = keys
    # the loop's frame and its callers, not the helper the loop keeps calling
    assert spin.key == f"{HANG_TYPE} @ triage_targets._spin > triage_targets.hang_target", spin
    assert spin_again == spin
    assert stall.key == f"{HANG_TYPE} @ triage_targets._stall > triage_targets.hang_target"


def test_a_hang_deep_in_a_stack_keeps_its_identity_past_the_cut():
    """The plain replay's stack of a hang 200 frames deep (pydot's pyparsing grammar) is longer than
    a finding's detail: cut by characters it lost its mark, and every such hang was a bare
    ``timeout``, each one saved as a bug of its own. Whole frames of both ends are kept now."""
    keys = []
    for data in (b"d", b"dx"):
        verdict, detail = _plain("deep_hang_target", data, timeout_s=0.3)
        assert verdict is Verdict.HUNG, detail
        assert len(detail) <= 8100 and HANG_STACK_MARK in detail, detail[:300]
        keys.append(identity_from_detail(detail, f"{MOD}:deep_hang_target", kind="hang"))
    assert keys[0] == keys[1] and keys[0].has_frames, keys
    assert keys[0].key.startswith(f"{HANG_TYPE} @ triage_targets._stall > triage_targets._descend"), keys[0]


def test_a_hang_without_a_stack_has_no_frames():
    ident = identity_from_detail("target process was killed: execution overran 1 s", "m:f", kind="hang")
    assert ident.crash_type == HANG_TYPE and not ident.has_frames


@pytest.mark.parametrize("data", [b"s", b"t"])
def test_the_minimizer_takes_a_hang_identity_as_the_campaign_does(data):
    from symfence.worker.triage.minimize_child import python_oracle

    run = python_oracle(f"{MOD}:hang_target", 0.2, code_under_test(f"{MOD}:hang_target"))
    outcome, detail = run(data)
    _, plain = _plain("hang_target", data, timeout_s=0.3)
    assert outcome == "hang " + identity_from_detail(plain, f"{MOD}:hang_target", kind="hang").key, detail


class _Journal:
    """The journal's side of Triage.restore: its triage rows (identity, stage, min_data, min_s)."""

    def __init__(self, rows: dict[tuple[str, int], tuple[str, str, bytes | None, float | None]]) -> None:
        self.rows = rows

    def triage(self) -> dict[tuple[str, int], tuple[str, str, bytes | None, float | None]]:
        return self.rows

    def note_triage(self, *args: Any, **kwargs: Any) -> None:
        pass


def test_old_journals_resume_with_their_old_names_and_know_their_bugs_by_the_new_rules(tmp_path):
    from symfence.coordinator.journal.records import Finding, FindingKind
    from symfence.coordinator.outputs import OutputDir
    from symfence.coordinator.triage import Triage
    from symfence.protocol.crashkey import CrashIdentity

    target = f"{MOD}:url_target"
    ipv6 = _plain("url_target", b"http://[::1")[1]
    old_key = "ValueError @ triage_targets.url_target"  # what main's rules stored for it
    hang = _plain("hang_target", b"t", timeout_s=0.3)[1]
    findings = [Finding(FindingKind.CRASH, 0, "a" * 64, b"http://[::1", target, ipv6, "w" * 64, 1.0),
                Finding(FindingKind.CRASH, 1, "b" * 64, b"http://[::1]x", target, ipv6, "w" * 64, 2.0),
                Finding(FindingKind.HANG, 0, "c" * 64, b"tt", f"{MOD}:hang_target", hang, "w" * 64, 3.0)]
    rows = {("crash", 0): (old_key, "concolic", None, None),  # identity stored by the old rules
            ("hang", 0): ("", "fuzz", None, None)}  # crash 1: a journal from before identities
    triage = Triage(OutputDir(tmp_path / "out"), _Journal(rows), base_executor="hybrid",
                    base_options={"exec_timeout_s": 1.0})
    triage.restore(findings)
    names = [triage.name_of(f) for f in findings]
    assert f",sig:{CrashIdentity.from_key(old_key).sig}," in names[0]  # its old name
    assert ",sig:ValueError,target:" in names[1]  # before identities: the exception type
    assert ",sig:timeout,target:" in names[2]  # a hang saved without a stack
    new = triage.identity(ipv6, target)
    assert new.key == "ValueError @ parse.urlsplit > triage_targets.url_target"
    assert triage.is_known(target, new) and triage.is_known(target, CrashIdentity.from_key(old_key))
    port = triage.identity(_plain("url_target", b"http://h:99999999")[1], target)
    assert not triage.is_known(target, port)  # the other bug of urllib.parse is still new
    stall = triage.identity(hang, f"{MOD}:hang_target", kind="hang")
    assert stall.has_frames and triage.is_known(f"{MOD}:hang_target", stall)
    # the minimizations owed look for the identity the minimizer computes now
    assert sorted(j.identity for j in triage.jobs.values()) == sorted([new.key, new.key, stall.key])


@pytest.mark.mpi
def test_campaign_saves_one_hang_per_loop(tmp_path):
    """Five seeds that hang in two loops (three in one, two in the other): two hang files, named
    by their loops, the other three counted as known hangs (a real concolic campaign, 3 ranks)."""
    import tomllib

    from tests.mpi_helpers import ROOT, run_campaign

    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for i, data in enumerate((b"s", b"SS", b"Sab", b"t", b"tq")):
        (seeds / f"seed{i}").write_bytes(data)
    cfg = tomllib.loads((ROOT / "configs" / "concolic.toml").read_text())
    cfg["campaign"].update(targets=[f"{MOD}:hang_target"], seeds=str(seeds), duration_s=40)
    cfg["concolic"]["options"]["exec_timeout_s"] = 0.3
    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=90)
    assert run.code == 0, run.explain()
    hangs = sorted(p.name for p in (run.out / "hangs").iterdir())
    assert len(hangs) == 2, (hangs, run.stats())
    assert any(",sig:timeout-triage_targets._spin-" in n for n in hangs), hangs
    assert any(",sig:timeout-triage_targets._stall-" in n for n in hangs), hangs
    assert int(run.stats().get("triage_rejected_known_hang", 0)) >= 3, run.stats()


def test_a_hang_inside_a_try_is_reported_at_the_call_that_hangs():
    """The stack of a hang names each frame's line where the sample found it, not the line
    reading it after the time-out unwound (the ``except`` that caught it: bitstring's hang was
    reported at the harness's ``except`` line); the replay's own script is no frame of it."""
    from symfence.worker.triage.minimize_child import python_oracle

    source = Path(triage_targets.__file__).read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "GUARDED_HANG_LINE" in text)
    verdict, detail = _plain("guarded_hang_target", b"x", timeout_s=0.3)
    assert verdict is Verdict.HUNG, detail
    stack = detail.split(HANG_STACK_MARK, 1)[1]
    assert f"line {line}, in guarded_hang_target" in stack and "except ValueError" not in stack, stack
    assert "<string>" not in stack, stack
    run = python_oracle(f"{MOD}:guarded_hang_target", 0.2, code_under_test(f"{MOD}:guarded_hang_target"))
    outcome, minimized = run(b"x")
    assert outcome.startswith("hang ") and f"line {line}, in guarded_hang_target" in minimized, minimized
