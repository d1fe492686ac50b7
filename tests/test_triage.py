"""Crash identity and minimization (issue 19): distinct bugs stay distinct, the same bug found
again is one, every crash shrinks; real targets, real cc/clang (ASan) builds, gdb, mpiexec."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import tomllib
import traceback
from pathlib import Path

import pytest

from bench.bench_minimize import CASES, run_minimizer
from symfence.coordinator.status_report import render_status
from symfence.coordinator.triage import Triage
from symfence.protocol.crashid import identity_from_detail
from symfence.protocol.crashkey import IdentitySource
from symfence.protocol.nativecrash import identity_from_sanitizer_report
from symfence.protocol.pycrash import identity_from_python_exception, identity_from_python_traceback
from symfence.worker.triage.symbolize import unlimited_address_space
from tests import triage_targets
from tests.mpi_helpers import ROOT, read_stat, run_campaign, stop_when
from tests.native_support import built, compile_c, needs_cc

# The Python target's bugs: two in the shared helper (one per parser), one reached by two paths.
INPUTS = {"header": b"H\xff.", "body": b"B\x00\xff", "kind_k": b"K\x77.", "kind_l": b"L\x77l"}
MINIMAL = 3  # every one of them needs 3 bytes (target returns on less)

THREE_BUGS_C = r"""
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int *volatile sink = 0;
__attribute__((noinline)) void first_bug(void) { *sink = 1; }
__attribute__((noinline)) void second_bug(void) { sink[4] = 2; }
__attribute__((noinline)) int overflow(const unsigned char *b) {
  int *p = malloc(4 * sizeof(int)); memcpy(p, b, 16); int v = p[b[1]]; free(p); return v; }
int main(void) {
  unsigned char buf[64] = {0}; long n = read(0, buf, sizeof buf);
  if (n > 0 && buf[0] == 'A') first_bug();
  if (n > 0 && buf[0] == 'B') second_bug();
  if (n > 1 && buf[0] == 'C') return overflow(buf);
  return 0; }
"""


def _identity(data: bytes):
    try:
        triage_targets.target(data)
    except Exception as exc:  # noqa: BLE001
        text = "".join(traceback.format_exception(exc))
        ident = identity_from_python_exception(exc, "tests.triage_targets:target")
        # one rule for both forms
        assert identity_from_python_traceback(text, "tests.triage_targets:target") == ident
        return ident
    raise AssertionError(f"{data!r} does not crash")


def test_python_helper_bugs_two_identities_same_bug_two_paths_one():
    ids = {name: _identity(data) for name, data in INPUTS.items()}
    assert ids["header"].frames == ("triage_targets._read_length", "triage_targets.parse_header",
                                    "triage_targets.target")
    assert ids["header"].key != ids["body"].key  # one helper, two callers: two bugs
    assert ids["kind_k"].key == ids["kind_l"].key  # one bug by two paths
    assert len({i.key for i in ids.values()}) == 3
    for ident in ids.values():
        assert len(ident.sig) <= 64 and ident.sig.isascii() and "," not in ident.sig and "/" not in ident.sig


def test_python_frames_skip_symfence_and_stdlib_unless_the_target_is_there():
    import json

    try:
        json.loads(b"{")
    except ValueError as exc:
        outside = identity_from_python_exception(exc, "mymod:target")
        inside = identity_from_python_exception(exc, "json:loads")
    assert outside.frames == (
        "test_triage.test_python_frames_skip_symfence_and_stdlib_unless_the_target_is_there",)
    assert inside.frames[0].startswith("decoder.")  # the target is in the standard library: its frames count


@needs_cc
@pytest.mark.skipif(not shutil.which("clang") or not shutil.which("gdb"), reason="needs clang (ASan) and gdb")
def test_native_two_segvs_and_a_heap_overflow_are_three_unique_crashes(tmp_path):
    from symfence.worker.native.base import NativeOptions, signal_name
    from symfence.worker.native.runner import with_frames

    plain = compile_c(tmp_path, "three", THREE_BUGS_C, "-g")
    asan = compile_c(tmp_path, "three_asan", THREE_BUGS_C, "-g", "-fsanitize=address", cc="clang")
    inputs = [b"A" + bytes(10), b"B" + bytes(10), b"C\x09" + bytes(20)]
    for binary, bugs in ((plain, 2), (asan, 3)):  # the plain build reads past the heap block unharmed
        triage = Triage.__new__(Triage)
        triage.known = set()
        triage.base_executor, triage.base_options = "native", {}
        kept = []
        for data in inputs + [inputs[0] + b"more", inputs[1] + b"more"]:  # each found twice
            code = subprocess.run([str(binary)], input=data, capture_output=True,
                                  preexec_fn=unlimited_address_space).returncode
            if code == 0:
                continue
            detail = with_frames(str(binary), data, NativeOptions(), f"{signal_name(-code)}: killed")
            ident = triage.identity(detail, str(binary))
            assert ident.has_frames, detail
            if not triage.is_known(str(binary), ident):
                triage.remember(str(binary), ident)
                kept.append(ident)
        assert len(kept) == bugs, [i.key for i in kept]
        if binary == asan:
            assert [i.crash_type for i in kept] == ["SEGV WRITE", "SEGV WRITE", "heap-buffer-overflow READ 4"]
            assert [i.frames[0] for i in kept] == ["first_bug", "second_bug", "overflow"]
            assert all(i.source is IdentitySource.SANITIZER for i in kept)
        else:
            assert [i.crash_type for i in kept] == ["SIGSEGV", "SIGSEGV"]
            assert [i.frames[0].split("+")[0] for i in kept] == ["first_bug", "second_bug"]
            assert all("+0x" in i.frames[0] and i.source is IdentitySource.BACKTRACE for i in kept)


def test_frameless_native_crash_falls_back_to_the_edge_path():
    a = identity_from_detail("SIGSEGV: x killed by SIGSEGV", "x", [5, 9, 12])
    b = identity_from_detail("SIGSEGV: x killed by SIGSEGV", "x", [12, 9, 5])
    c = identity_from_detail("SIGSEGV: x killed by SIGSEGV", "x", [5, 9])
    assert a == b and a != c and a.source is IdentitySource.EDGE_PATH
    report = "==1==ERROR: AddressSanitizer: stack-buffer-overflow on address 0x1\nWRITE of size 8 at 0x1\n" \
             "    #0 0x1 in __interceptor_memcpy (/usr/lib/libasan.so.8+0x1)\n" \
             "    #1 0x2 in fill /src/f.c:3:5\n"
    assert identity_from_sanitizer_report(report).key == "stack-buffer-overflow WRITE 8 @ fill"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_demo_and_example_crash_shrinks_to_at_most_twice_its_minimal_size(case):
    if case.native and not shutil.which("cc"):
        pytest.skip("no C compiler")
    result = run_minimizer(case, built() if case.native else None, budget_s=60.0)
    assert "error" not in result, result
    size = len(bytes.fromhex(result["data"]))
    assert case.minimal <= size <= 2 * case.minimal, (case.name, size, case.minimal)
    assert not result["mismatch"]


def count(folder: Path) -> int:
    return sum(1 for _ in folder.iterdir()) if folder.is_dir() else 0


@pytest.mark.mpi
@pytest.mark.heavy
def test_campaign_keeps_distinct_bugs_minimizes_them_and_resumes_with_old_names(tmp_path):
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for name, data in INPUTS.items():
        (seeds / name).write_bytes(data + bytes(range(60)))  # noise the bugs do not need
    cfg = tomllib.loads((ROOT / "configs" / "demo.toml").read_text())
    cfg["campaign"].update(targets=["tests.triage_targets:target"], seeds=str(seeds), duration_s=60)
    out = tmp_path / "out"

    def triaged(known_at_least: int):  # all three saved and minimized, known ones turned away
        return stop_when(lambda: count(out / "crashes") >= 3 and count(out / "minimized" / "crashes") >= 3
                         and read_stat(out, "triage_rejected_known_crash") >= known_at_least)

    # the budget is a cap: the campaign stops once the dedupe has turned away 3 re-found bugs
    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=150, out=out, on_start=triaged(3))
    assert run.code == 0, run.explain()
    crashes = sorted(p.name for p in (run.out / "crashes").iterdir())
    assert len(crashes) == 3, crashes  # header and body: two; K and L: one
    assert sum(",sig:ValueError-triage_targets._read_length-" in n for n in crashes) == 2
    minimized = {p.name: p.read_bytes() for p in (run.out / "minimized" / "crashes").iterdir()}
    assert sorted(minimized) == crashes
    assert all(MINIMAL <= len(d) <= 2 * MINIMAL for d in minimized.values()), minimized
    for data in minimized.values():  # still the same bug
        with pytest.raises((ValueError, LookupError)):
            triage_targets.target(data)
    report = render_status(run.out)
    body = "ValueError @ triage_targets._read_length > triage_targets.parse_body"
    assert report.count(" -> ") == 3 and body \
        in report and "reproduce: python -c" in report, report
    identity_lines = [p.read_text().splitlines()[0] for p in (run.out / "crash_details").iterdir()]
    assert all(l.startswith("identity: ") for l in identity_lines)

    # A journal from before identities: no triage table, its files named by the exception type alone.
    db = sqlite3.connect(run.out / "journal.sqlite")
    db.execute("DROP TABLE triage")
    db.commit()
    db.close()
    for folder in ("crashes", "minimized"):
        shutil.rmtree(run.out / folder)
    cfg["campaign"]["duration_s"] = 20  # a cap: stopped once found again, minimized
    known = read_stat(run.out, "triage_rejected_known_crash")  # carried over by --resume
    again = run_campaign(tmp_path, cfg, ranks=2, timeout_s=120, out=run.out, extra_args=["--resume"],
                         on_start=triaged(known + 1))
    assert again.code == 0, again.explain()
    names = sorted(p.name for p in (run.out / "crashes").iterdir())
    assert len(names) == 3, names  # the same bugs, found again, are not saved again
    old_sigs = sorted(n.split(",sig:")[1].split(",")[0] for n in names)
    assert old_sigs == ["LookupError", "ValueError", "ValueError"]
    assert len(list((run.out / "minimized" / "crashes").iterdir())) == 3  # owed minimizations done on resume
