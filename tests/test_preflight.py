"""Every mistake of a first hour is one line naming the key or target, exit 2, before mpiexec starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from symfence.coordinator.config import parse
from symfence.coordinator.preflight import PreflightError, check_resume, save_snapshot
from tests.mpi_helpers import MPIEXEC, toml_dump

GOOD = "def target(data):\n    if data[:1] == b'!':\n        raise ValueError('bang')\n"


def symfence(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as a user would run it
    return subprocess.run([sys.executable, "-m", "symfence", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def project(tmp_path: Path, targets: list[str], modules: dict[str, str] | None = None,
            **sections: dict) -> Path:
    """A user's folder outside the repository: target modules and campaign.toml."""
    folder = tmp_path / "proj"
    folder.mkdir(exist_ok=True)
    for name, source in (modules or {"parser": GOOD}).items():
        path = folder / f"{name.replace('.', '/')}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    cfg = {"campaign": {"targets": targets, "duration_s": 20, "ranks": 2}}
    for name, table in sections.items():
        cfg.setdefault(name, {}).update(table)
    (folder / "campaign.toml").write_text(toml_dump(cfg))
    return folder


def assert_refused(r: subprocess.CompletedProcess, *words: str, code: int = 2) -> None:
    assert r.returncode == code, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr  # one line, no traceback, mpiexec never launched
    assert lines[0].startswith("symfence: ") and "launching" not in r.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.parametrize(("modules", "target", "words"), [
    ({"parser": GOOD}, "nomodule:target", ("target nomodule:target", "no module named 'nomodule'")),
    ({"parser": "def target(data)\n    pass\n"}, "parser:target", ("target parser:target", "syntax error", "parser.py line 1")),
    ({"parser": "import yaml_not_installed\n" + GOOD}, "parser:target",
     ("target parser:target", "'yaml_not_installed'", "missing dependency")),
    ({"parser": GOOD}, "parser:parse", ("target parser:parse", "no callable 'parse'")),
    ({"parser": "def target():\n    pass\n"}, "parser:target", ("target parser:target", "one argument")),
    ({"parser": "raise RuntimeError('needs a database')\n"}, "parser:target", ("RuntimeError: needs a database",)),
])
def test_a_target_that_cannot_run_is_refused_up_front(tmp_path, modules, target, words):
    folder = project(tmp_path, [target], modules)
    r = symfence(folder, "run", "campaign.toml", "--out", "out")
    assert_refused(r, *words)
    assert not (folder / "out").exists()


def test_no_colon_in_the_target_spec(tmp_path):
    r = symfence(project(tmp_path, ["parser"]), "run", "campaign.toml")
    assert_refused(r, "campaign.targets", "no ':'")


def test_wrong_option_type_names_the_key(tmp_path):
    folder = project(tmp_path, ["parser:target"], concolic={"options": {"exec_timeout_s": "2"}})
    assert_refused(symfence(folder, "run", "campaign.toml"), "concolic.options.exec_timeout_s")
    folder = project(tmp_path, ["parser:target"], concolic={"options": {"max_branch": 10}})
    assert_refused(symfence(folder, "run", "campaign.toml"), "concolic.options.max_branch", "unknown")


def test_out_that_is_a_file_or_under_a_file_or_not_writable(tmp_path):
    folder = project(tmp_path, ["parser:target"])
    (folder / "afile").write_text("x")
    assert_refused(symfence(folder, "run", "campaign.toml", "--out", "afile"), "--out", "is a file")
    assert_refused(symfence(folder, "run", "campaign.toml", "--out", "afile/sub/out"), "--out", "which is a file")
    if os.geteuid() == 0:
        locked = Path("/sys/symfence-out")  # read-only even for root
    else:
        (folder / "ro").mkdir()
        (folder / "ro").chmod(0o555)
        locked = folder / "ro" / "out"
    assert_refused(symfence(folder, "run", "campaign.toml", "--out", str(locked)), "--out", "not writable")


def test_seeds_missing_or_empty(tmp_path):
    folder = project(tmp_path, ["parser:target"], campaign={"seeds": "seeds"})
    assert_refused(symfence(folder, "run", "campaign.toml"), "campaign.seeds", "does not exist")
    (folder / "seeds").mkdir()
    assert_refused(symfence(folder, "run", "campaign.toml"), "campaign.seeds", "empty")
    (folder / "seeds" / "a").write_text("")
    (folder / "seeds" / "a").unlink()
    (folder / "seeds" / "sub").mkdir()  # a folder is not a seed file
    assert_refused(symfence(folder, "run", "campaign.toml"), "campaign.seeds", "empty")


@pytest.mark.mpi
def test_rank_0_refuses_a_bad_target_under_plain_mpiexec_and_the_job_ends(tmp_path):
    """Launched by mpiexec directly (no `symfence run`), rank 0 does the same checks, stops the
    workers and the job exits non-zero instead of hanging."""
    folder = project(tmp_path, ["nomodule:target"])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "symfence.coordinator", "--config",
                        "campaign.toml", "--out", "out", "--no-status"], cwd=folder, capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "symfence: target nomodule:target: no module named 'nomodule'" in r.stderr
    assert "Traceback" not in r.stderr


def _cfg(**campaign) -> dict:
    return {"campaign": {"executor": "concolic", "targets": ["a:t"], **campaign}}


@pytest.mark.parametrize(("before", "after", "key", "words"), [
    (_cfg(), {"campaign": {"executor": "synthetic", "targets": ["a:t"]}}, "campaign.executor", "'concolic' to 'synthetic'"),
    (_cfg(), {**_cfg(), "concolic": {"options": {"exec_timeout_s": 2.0}}}, "concolic.options.exec_timeout_s",
     "exec_timeout_s 'default' -> 2.0"),
    (_cfg(), {**_cfg(), "coverage": {"include": ["a"]}}, "coverage.include", "cov_include '' -> 'a'"),
    (_cfg(targets=["a:t", "b:t"]), _cfg(), "campaign.targets", "b:t removed"),
])
def test_resume_refuses_a_change_that_would_orphan_the_journal(tmp_path, before, after, key, words):
    save_snapshot(parse(before), tmp_path)
    with pytest.raises(PreflightError) as e:
        check_resume(parse(after), tmp_path)
    assert e.value.key == key and words in str(e.value) and "\n" not in str(e.value)


def test_resume_applies_added_targets_and_run_time_settings(tmp_path):
    save_snapshot(parse(_cfg()), tmp_path)
    changes = check_resume(parse({**_cfg(targets=["a:t", "b:t"], duration_s=5.0), "dispatch": {"depth": 4}}), tmp_path)
    assert changes.added_targets == ("b:t",)
    assert set(changes.changed_keys) == {"campaign.duration_s", "dispatch.depth"}


@pytest.mark.mpi
def test_resume_with_a_new_target_fuzzes_it_and_a_refused_change_starts_nothing(tmp_path):
    from tests.mpi_helpers import run_campaign

    def cfg(targets, **options):
        return {"campaign": {"executor": "concolic", "targets": targets, "duration_s": 60},
                "concolic": {"options": {"exec_timeout_s": 1.0, **options}}}

    first = run_campaign(tmp_path, cfg(["examples.magic_header:target"]), ranks=2)
    assert first.code == 0, first.stderr[-2000:]
    assert [p.name for p in (first.out / "crashes").iterdir()] == \
        ["id:000000,sig:MagicHeaderBug-magic_header.target-6d479dbc,target:examples.magic_header.target"]
    refused = run_campaign(tmp_path, cfg(["examples.magic_header:target"], exec_timeout_s=2.0), ranks=2,
                           out=first.out, extra_args=["--resume"])
    assert refused.code == 2 and "concolic.options.exec_timeout_s: changed since the campaign" in refused.stderr
    second = run_campaign(tmp_path, cfg(["examples.magic_header:target", "examples.checksum:target"]), ranks=2,
                          out=first.out, extra_args=["--resume"])
    assert second.code == 0, second.stderr[-2000:]
    changed = [e for e in second.events() if e["event"] == "campaign.config_changed"]
    assert changed and changed[-1]["added_targets"] == ["examples.checksum:target"]
    crashes = sorted(p.name for p in (first.out / "crashes").iterdir())
    assert crashes[-1] == "id:000001,sig:ChecksumBug-checksum.target-1db145fa,target:examples.checksum.target", crashes
