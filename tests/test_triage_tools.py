"""symfence replay / cmin / coverage and the pytest plugin on real campaigns (docs/triage.md).

One small Python campaign and one native campaign (real mpiexec, seeds that already crash and
hang, so each ends in seconds) are shared by the tests of this module. The Python target lives
in a project folder outside the repository, as a user's does; its "fixed" copies are other
folders with a module of the same name.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mpi_helpers import ROOT
from tests.native_support import HAVE_AFL, compile_c, needs_afl, needs_cc, needs_tritondse

pytestmark = [pytest.mark.mpi, pytest.mark.heavy]  # campaigns in module fixtures

BUGS = '''
def _read_length(data, pos):
    return data[pos]


def target(data: bytes) -> None:
    if data.startswith(b"CR") and len(data) > 3:
        n = _read_length(data, 2)
        if n == 0x21:
            raise ValueError("planted: length 0x21")
    if data == b"HANG":
        while True:
            pass
'''
FIXES = {
    "fixed": BUGS.replace('raise ValueError("planted: length 0x21")', "return").replace(
        "while True:\n            pass", "return"),
    "hang_only": BUGS.replace('raise ValueError("planted: length 0x21")', "return"),
    "other_bug": BUGS.replace('raise ValueError("planted: length 0x21")', "return").replace(
        "while True:\n            pass", "return").replace(
        "def target(data: bytes) -> None:\n", "def target(data: bytes) -> None:\n"
        "    if data.startswith(b\"CR\") and len(data) > 3 and data[2] == 0x21:\n"
        "        raise KeyError('another bug on the same input')\n"),
    "corpus_bug": BUGS.replace('raise ValueError("planted: length 0x21")', "return").replace(
        "while True:\n            pass", "return").replace(
        "def target(data: bytes) -> None:\n", "def target(data: bytes) -> None:\n"
        "    if data == b'plain seed':\n        raise IndexError('a bug a corpus entry hits now')\n"),
}
SEEDS = {"crash": b"CR\x21!", "hang": b"HANG", "a": b"plain seed", "b": b"CR\x05xyz"}
CAMPAIGN = '''[campaign]
executor = "concolic"
targets = ["bugs:target"]
seeds = "seeds"
duration_s = 60
ranks = 2
[concolic.options]
exec_timeout_s = 0.5
'''


def symfence(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "symfence", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def project(folder: Path, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bugs.py").write_text(source)
    return folder


@pytest.fixture(scope="module")
def py_campaign(tmp_path_factory) -> Path:
    """A finished campaign: its project folder (the unfixed target) holds out/."""
    proj = project(tmp_path_factory.mktemp("user") / "proj", BUGS)
    (proj / "seeds").mkdir()
    for name, data in SEEDS.items():
        (proj / "seeds" / name).write_bytes(data)
    (proj / "campaign.toml").write_text(CAMPAIGN)
    r = symfence("run", "campaign.toml", "--out", "out", "--no-status", cwd=proj, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert len(list((proj / "out" / "crashes").glob("id:*"))) == 1
    assert len(list((proj / "out" / "hangs").glob("id:*"))) == 1
    return proj


def rows(stdout: str) -> dict[str, str]:
    """input label -> the `now` column of replay's table."""
    out = {}
    for line in stdout.splitlines():
        m = re.match(r"^((?:crashes|hangs|queue)/id:\d+)\s+\S+\s+(.+?)\s{2,}", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


# ---------------------------------------------------------------------------------- replay, Python


def test_replay_python_unfixed_fixed_and_partly_fixed_copies(py_campaign, tmp_path):
    out = py_campaign / "out"
    unfixed = symfence("replay", str(out), cwd=py_campaign)
    assert unfixed.returncode == 1, unfixed.stdout + unfixed.stderr
    assert rows(unfixed.stdout) == {"crashes/id:000000": "still crashes (same identity)",
                                    "hangs/id:000000": "still hangs"}, unfixed.stdout
    assert "ValueError @ bugs._read_length" not in unfixed.stdout  # the crash is in target, not the helper
    assert "ValueError @ bugs.target" in unfixed.stdout

    fixed = symfence("replay", str(out), cwd=project(tmp_path / "fixed", FIXES["fixed"]))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert set(rows(fixed.stdout).values()) == {"fixed"}

    hang_only = symfence("replay", str(out), cwd=project(tmp_path / "hang_only", FIXES["hang_only"]))
    assert hang_only.returncode == 4, hang_only.stdout
    assert rows(hang_only.stdout)["crashes/id:000000"] == "fixed"

    other = symfence("replay", str(out), "-v", cwd=project(tmp_path / "other", FIXES["other_bug"]))
    assert other.returncode == 1, other.stdout
    assert rows(other.stdout)["crashes/id:000000"] == "crashes differently"
    assert "ValueError @ bugs.target -> KeyError @ bugs.target" in other.stdout
    assert "KeyError: 'another bug on the same input'" in other.stdout  # -v: the traceback


def test_replay_corpus_reports_new_crashes_and_files_mode(py_campaign, tmp_path):
    out = py_campaign / "out"
    proj = project(tmp_path / "corpus_bug", FIXES["corpus_bug"])
    r = symfence("replay", str(out), "--corpus", cwd=proj)
    assert r.returncode == 1, r.stdout + r.stderr
    now = rows(r.stdout)
    assert now["crashes/id:000000"] == "fixed" and now["hangs/id:000000"] == "fixed"
    assert list(now.values()).count("new crash") == 1, r.stdout
    assert "IndexError @ bugs.target" in r.stdout
    # without --corpus that bug is not seen
    assert symfence("replay", str(out), cwd=proj).returncode == 0
    # FILES: a saved crash file by its path
    crash = next((out / "crashes").glob("id:*"))
    one = symfence("replay", str(crash), cwd=py_campaign)
    assert one.returncode == 1 and list(rows(one.stdout)) == ["crashes/id:000000"], one.stdout


def test_replay_usage_and_unreplayable_exit_codes(py_campaign, tmp_path):
    out = py_campaign / "out"
    assert symfence("replay", str(tmp_path), cwd=tmp_path).returncode == 2  # not a campaign
    stray = tmp_path / "stray"
    stray.write_bytes(b"x")
    r = symfence("replay", str(stray), cwd=tmp_path)
    assert r.returncode == 2 and "not a file in a campaign" in r.stderr
    r = symfence("replay", str(out), "--target", "nosuch:target=other:target", cwd=py_campaign)
    assert r.returncode == 2 and "--target" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = symfence("replay", str(out), cwd=empty)  # bugs.py not importable from here
    assert r.returncode == 5, r.stdout + r.stderr
    assert "No module named 'bugs'" in r.stdout


# ---------------------------------------------------------------------------------- coverage, Python


def test_coverage_report_numbers_equal_the_benchmark_yardstick(py_campaign, tmp_path):
    out, html = py_campaign / "out", tmp_path / "html"
    r = symfence("coverage", str(out), "--html", str(html), cwd=py_campaign)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads((html / "coverage.json").read_text())
    ours = json.loads((html / "symfence-coverage.json").read_text())
    # the benchmarks' replay (bench/parser_replay.py) over the same files: corpus + crashes
    files = [p for d in ("queue", "crashes") for p in sorted((out / d).glob("id:*"))]
    listing = tmp_path / "files.txt"
    listing.write_text("\n".join(str(p) for p in files))
    env = {**os.environ, "PYTHONPATH": f"{py_campaign}{os.pathsep}{ROOT}"}
    bench = subprocess.run([sys.executable, "-m", "bench.parser_replay", "bugs:target", "bugs", "0",
                            f"@{listing}"],
                           cwd=py_campaign, capture_output=True, text=True, env=env, timeout=120)
    assert bench.returncode == 0, bench.stderr
    yardstick = json.loads(bench.stdout.strip().splitlines()[-1])
    assert report["totals"]["covered_lines"] == ours["lines"] == yardstick["lines"]
    assert report["totals"]["num_statements"] == ours["statements"] == yardstick["statements"]
    # every line of bugs.py: the HANG seed is a corpus entry too (replayed until its time limit)
    assert ours["lines"] == ours["statements"] == 10 and ours["hangs"] == 1
    page = (html / "index.html").read_text()
    assert "bugs.py" in page and f"{report['totals']['percent_covered_display']}%" in page
    assert f"{ours['lines']} of {ours['statements']} lines covered" in r.stdout


# ---------------------------------------------------------------------------------- pytest


def test_pytest_plugin_and_fuzz_api_from_a_project_outside_the_repository(py_campaign, tmp_path):
    out = py_campaign / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                  "--symfence-replay", str(out)]
    r = subprocess.run(pytest_cmd, cwd=py_campaign, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1, r.stdout[-3000:]
    assert "2 failed" in r.stdout and "still hangs" in r.stdout
    assert "still crashes (same identity)" in r.stdout
    assert "ValueError: planted: length 0x21" in r.stdout  # the traceback of this run
    fixed = project(tmp_path / "fixed", FIXES["fixed"])
    r = subprocess.run(pytest_cmd, cwd=fixed, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-3000:]

    # symfence.testing.fuzz inside a user's test: the planted bug, minimized, fails the test
    proj = project(tmp_path / "fuzzing", BUGS.replace("if data == b\"HANG\"", "if False"))
    (proj / "test_bugs.py").write_text(
        "import symfence.testing\nimport bugs\n\n"
        "def test_fuzz_bugs():\n"
        "    symfence.testing.fuzz(bugs.target, budget_s=60, seed=7, seeds=[b'CR\\x00\\x00'])\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=proj,
                       capture_output=True, text=True, env=env, timeout=240)
    assert r.returncode == 1, r.stdout[-3000:]
    assert "FuzzFailure" in r.stdout and "bugs:target crashes (ValueError @ bugs.target)" in r.stdout
    m = re.search(r"minimized input \((\d+) bytes, from (\d+)\): (b'.*')", r.stdout)
    assert m, r.stdout[-3000:]
    assert int(m.group(1)) <= 4  # minimal: CR, the length byte 0x21, one more byte (len > 3)
    assert eval(m.group(3))[2] == 0x21  # noqa: S307 - a bytes literal pytest printed
    assert "ValueError: planted: length 0x21" in r.stdout


def test_fuzz_is_deterministic_for_a_seed(tmp_path, monkeypatch):
    import symfence.testing

    proj = project(tmp_path / "det", BUGS.replace("if data == b\"HANG\"", "if False"))
    monkeypatch.syspath_prepend(str(proj))
    runs = [symfence.testing.fuzz("bugs:target", budget_s=60, seed=3, seeds=[b"CR\x00\x00", b"xy"],
                                  raise_on_finding=False, minimize_s=10) for _ in range(2)]
    assert runs[0].finding is not None and runs[0].finding.identity == "ValueError @ bugs.target"
    assert runs[0].executed == runs[1].executed and runs[0].finding == runs[1].finding
    with pytest.raises(symfence.testing.FuzzFailure, match=r"minimized input \(\d+ bytes"):
        symfence.testing.fuzz("bugs:target", budget_s=60, seed=3, seeds=[b"CR\x00\x00"], minimize_s=5)


# ---------------------------------------------------------------------------------- native

RECORD = (ROOT / "examples" / "native" / "record.c").read_text()
FIXED_RECORD = RECORD.replace("*record_sink = 0x42;", "return 6;").replace(
    "for (;;) record_spin++;", "return 7;")


def _record_seeds(folder: Path) -> None:
    """Crash and hang seeds, and records whose payload length varies (hit-count classes differ)."""
    folder.mkdir()
    (folder / "crash").write_bytes(b"SFRC\x42\xee\xff\xc0\x02\x42!!")
    (folder / "hang").write_bytes(b"SFRC\xd5\xee\x05\x10\x04\x00LOOP")
    for n in (0, 1, 2, 3, 5, 9, 17, 40, 100, 140):
        (folder / f"len{n:03d}").write_bytes(b"SFRC" + bytes([n]) * 4 + bytes([n, 0]) + b"p" * n)
    for i, kind in enumerate((b"\x42\xee\xff\xc0", b"\xd5\xee\x05\x10")):
        (folder / f"kind{i}").write_bytes(b"SFRC" + kind + b"\x03\x00abc")
    (folder / "short").write_bytes(b"SFRC")


@pytest.fixture(scope="module")
def native_campaign(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("native")
    record = compile_c(folder, "record", RECORD, "-g")
    if HAVE_AFL:
        compile_c(folder, "record.afl", RECORD, "-g", cc="afl-cc")
    compile_c(folder, "record_fixed", FIXED_RECORD, "-g")
    _record_seeds(folder / "seeds")
    (folder / "campaign.toml").write_text(
        '[campaign]\nexecutor = "native"\ntargets = ["./record"]\nseeds = "seeds"\nduration_s = 60\n'
        'ranks = 2\n'
        '[dispatch]\ndeadline_s = 120\n[fuzz]\nnative_slices = false\n'  # ends when the engine's work does
        '[native.options]\nexec_timeout_s = 0.5\nengine_timeout_s = 10.0\n'
        f'oracle = "{"forkserver" if HAVE_AFL else "engine"}"\n')
    r = symfence("run", "campaign.toml", "--out", "out", "--no-status", cwd=folder, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert record.is_file()
    return folder


@needs_cc
@needs_tritondse
def test_replay_native_unfixed_and_fixed_build(native_campaign):
    out = native_campaign / "out"
    r = symfence("replay", "out", cwd=native_campaign)
    assert r.returncode == 1, r.stdout + r.stderr
    now = rows(r.stdout)  # the engine may find the hang again through other bytes: hangs have no identity
    assert now["crashes/id:000000"] == "still crashes (same identity)" and "hangs/id:000000" in now, r.stdout
    assert {v for k, v in now.items() if k.startswith("hangs/")} == {"still hangs"}
    assert "SIGSEGV @ parse" in r.stdout  # gdb's frames of the plain build, as the campaign saved them
    fixed = symfence("replay", str(out), "--target", "record_fixed", cwd=native_campaign)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert set(rows(fixed.stdout).values()) == {"fixed"}


def _afl_cmin(queue: Path, to: Path, binary: Path, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "AFL_ALLOW_TMP": "1", "AFL_NO_UI": "1"}
    a = subprocess.run(["afl-cmin", *flags, "-i", str(queue), "-o", str(to), "-t", "500", "--", str(binary)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert a.returncode == 0, a.stdout[-2000:] + a.stderr[-2000:]
    return a


@needs_afl
@needs_cc
@needs_tritondse
def test_cmin_keeps_what_afl_cmin_keeps_on_a_native_corpus(native_campaign, tmp_path):
    """Edge coverage (afl-cmin -e): the same traces (afl-showmap per input), the same files kept.
    With hit counts, Debian's afl-showmap 4.04c writes no tuple at all for an edge hit 8 times or
    more (its -r and -e output have it), so afl-cmin keeps fewer tuples there; ours keeps every
    tuple afl-cmin keeps, on every edge."""
    out = native_campaign / "out"
    queue = tmp_path / "queue"  # afl-cmin reads a folder: the corpus without the entries that crash or hang
    shutil.copytree(out / "queue", queue)
    for name in ("crash", "hang"):
        data = (native_campaign / "seeds" / name).read_bytes()
        for p in list(queue.iterdir()):
            if p.read_bytes() == data:
                p.unlink()
    binary = native_campaign / "record.afl"

    r = symfence("cmin", str(out), "--to", str(tmp_path / "ours-e"), "--edges-only", "--oracle", "showmap",
                 cwd=native_campaign)
    assert r.returncode == 0, r.stdout + r.stderr
    a = _afl_cmin(queue, tmp_path / "afl-e", binary, "-e")
    names = lambda folder: sorted(p.name for p in folder.iterdir())  # noqa: E731
    assert names(tmp_path / "ours-e") == names(tmp_path / "afl-e")
    edges = int(re.search(r"Found (\d+) unique tuples", a.stdout).group(1))
    assert f" {edges} edges " in r.stdout and len(names(tmp_path / "ours-e")) < len(names(queue))

    r = symfence("cmin", str(out), "--to", str(tmp_path / "ours"), "--oracle", "showmap", cwd=native_campaign)
    assert r.returncode == 0, r.stdout + r.stderr
    a = _afl_cmin(queue, tmp_path / "afl", binary)
    theirs = int(re.search(r"Found (\d+) unique tuples", a.stdout).group(1))
    ours = int(re.search(r" (\d+) tuples \((\d+) edges\)", r.stdout).group(1))
    assert ours >= theirs and f"({edges} edges)" in r.stdout, (r.stdout, a.stdout[-500:])
    # the campaign's own map (the forkserver oracle, the default) gives the same tuples here
    f = symfence("cmin", str(out), "--to", str(tmp_path / "fsrv"), cwd=native_campaign)
    assert f.returncode == 0 and f" {ours} tuples ({edges} edges)" in f.stdout, f.stdout + f.stderr
    assert names(tmp_path / "fsrv") == names(tmp_path / "ours")


@needs_cc
@needs_tritondse
def test_coverage_report_of_a_native_coverage_build(native_campaign, tmp_path):
    src = native_campaign / "record.c"  # compile_c wrote it
    cov_dir = tmp_path / "covbuild"
    cov_dir.mkdir()
    binary = cov_dir / "record.cov"
    subprocess.run(["cc", "--coverage", "-O0", "-g", "-o", str(binary), str(src)], check=True, cwd=cov_dir)
    html = tmp_path / "html"
    r = symfence("coverage", "out", "--html", str(html), "--gcov-binary", str(binary), "--source-root",
                 str(native_campaign), cwd=native_campaign)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads((html / "coverage-summary.json").read_text())
    ours = json.loads((html / "symfence-coverage.json").read_text())
    assert ours["lines"] == summary["line_covered"] and ours["statements"] == summary["line_total"]
    # every line the corpus reaches except the two bug bodies, whose runs die before writing counters
    gcda = next(cov_dir.glob("*.gcda"))
    gcov = subprocess.run(["gcov", "-j", str(gcda)], cwd=tmp_path, capture_output=True)
    assert gcov.returncode == 0, gcov.stderr
    import gzip

    data = json.loads(gzip.decompress(next(tmp_path.glob("*.gcov.json.gz")).read_bytes()))
    lines = {line["line_number"]: line["count"] for f in data["files"] if f["file"].endswith("record.c")
             for line in f["lines"]}
    assert sum(1 for c in lines.values() if c) == summary["line_covered"]
    bug = next(i for i, t in enumerate(src.read_text().splitlines(), 1) if "*record_sink = 0x42" in t)
    loop = next(i for i, t in enumerate(src.read_text().splitlines(), 1) if "acc = (unsigned char)" in t)
    assert lines[bug] == 0 and lines[loop] > 0
    assert "record.c" in (html / "index.html").read_text()
