"""`symfence run fuzz_x.py ...`: libFuzzer flags become config keys, others are refused; dictionaries."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from symfence.coordinator import dropin
from symfence.coordinator.config import SCHEMA, import_path
from symfence.coordinator.config import parse as parse_config
from symfence.coordinator.fuzzdict import DictionaryError, read_tokens
from symfence.coordinator.preflight import PreflightError, check_dictionary


@pytest.fixture
def harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    (tmp_path / "fuzz").mkdir()
    path = tmp_path / "fuzz" / "fuzz_x.py"
    path.write_text("def TestOneInput(data):\n    pass\n")
    (tmp_path / "c1" / "deep").mkdir(parents=True)
    (tmp_path / "c1" / "deep" / "a").write_bytes(b"A")
    (tmp_path / "c2").mkdir()
    (tmp_path / "c2" / "b").write_bytes(b"A")  # the same content: one seed
    (tmp_path / "c2" / "c").write_bytes(b"C")
    return path


def test_flags_become_config_keys_and_corpora_the_seeds(harness: Path, tmp_path: Path) -> None:
    args, config = dropin.prepare(["run", "fuzz/fuzz_x.py", "c1", "c2", "-max_total_time=30",
                                   "-timeout=0.5", "-rss_limit_mb=512", "-max_len=100", "--ranks", "5",
                                   "--no-status"])
    raw = tomllib.loads(config.read_text())
    cfg = parse_config(raw)
    assert cfg["campaign.targets"] == ["fuzz_x:TestOneInput"] and cfg["campaign.executor"] == "hybrid"
    assert cfg["campaign.duration_s"] == 30 and cfg["fuzz.exec_timeout_s"] == 0.5
    options = cfg["concolic.options"]
    assert options["exec_timeout_s"] == 0.5 and options["memory_limit_mb"] == 512
    assert cfg["fuzz.rss_limit_mb"] == 512 and cfg["fuzz.max_len"] == 100
    assert args.ranks == 5 and args.no_status and Path(args.out) == Path("out/fuzz_x")
    seeds = Path(cfg["campaign.seeds"])
    assert sorted(p.read_bytes() for p in seeds.iterdir()) == [b"A", b"C"]
    assert cfg["campaign.pythonpath"] == [str(tmp_path / "fuzz")]  # as `python fuzz/fuzz_x.py` has it


def test_flags_of_what_libfuzzer_prints_are_taken_and_change_nothing(harness: Path) -> None:
    _, plain, _ = dropin.parse(["run", "fuzz/fuzz_x.py", "-max_total_time=30"])
    _, quiet, _ = dropin.parse(["run", "fuzz/fuzz_x.py", "-max_total_time=30", "-close_fd_mask=3",
                                "-print_final_stats=1"])
    assert quiet == plain


def test_without_flags_libfuzzer_defaults_and_no_seeds(harness: Path) -> None:
    _, config = dropin.prepare(["run", "fuzz/fuzz_x.py"])
    cfg = parse_config(tomllib.loads(config.read_text()))
    assert cfg["fuzz.max_len"] == 0 and cfg["campaign.seeds"] == ""
    # -max_total_time ends the run near that time: a short drain, not the config default's 10 s.
    assert cfg["dispatch.drain_timeout_s"] == 2.0 < SCHEMA["dispatch"]["drain_timeout_s"][0]


def test_a_harness_run_takes_every_option_of_a_config_run(harness: Path) -> None:
    """One list of run options: each of `symfence run CONFIG`'s reaches `symfence run fuzz_x.py`
    (the drop-in once kept a copy of the list and lost --store, crashing the launch)."""
    import argparse

    from symfence.coordinator.cli import add_run_options

    p = argparse.ArgumentParser()
    add_run_options(p)
    options = [a.dest for a in p._actions if a.option_strings and a.dest != "help"]
    args, _, _ = dropin.parse(["run", "fuzz/fuzz_x.py", "--store", "sqlite:/tmp/x.db"])
    assert args.store == "sqlite:/tmp/x.db"
    assert all(hasattr(args, name) for name in options), options


@pytest.mark.parametrize(("argv", "message"), [
    (["-runs=10"], "-runs: a libFuzzer flag symfence does not take"),
    (["-max_total_time"], "-max_total_time: needs a value"),
    (["-timeout=fast"], "-timeout=fast: not a valid value"),
    (["-timeout=0"], "-timeout=0: not a valid value"),
    (["-jobs=0"], "-jobs=0: not a valid value"),
    (["-workers=many"], "-workers=many: not a valid value"),
    (["-close_fd_mask=8"], "-close_fd_mask=8: not a valid value"),
    (["nowhere"], "nowhere: not a corpus folder"),
    (["--bogus"], "--bogus: not an option"),
])
def test_bad_command_lines_are_one_line(harness: Path, argv: list[str], message: str) -> None:
    with pytest.raises(dropin.UsageError) as e:
        dropin.parse(["run", "fuzz/fuzz_x.py", *argv])
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@pytest.mark.parametrize(("argv", "cores", "ranks"), [
    ([], 16, None),  # campaign.ranks' default
    (["-jobs=8"], 16, 9),  # libFuzzer: min(jobs, half the cores) at a time
    (["-jobs=8"], 4, 3),
    (["-jobs=2"], 2, 2),
    (["-workers=3"], 2, 4),
    (["-jobs=8", "-workers=5"], 2, 6),
])
def test_jobs_and_workers_become_worker_ranks(harness: Path, monkeypatch: pytest.MonkeyPatch,
                                              argv: list[str], cores: int, ranks: int | None) -> None:
    monkeypatch.setattr(dropin.os, "cpu_count", lambda: cores)
    args, tables, _ = dropin.parse(["run", "fuzz/fuzz_x.py", *argv])
    assert tables["campaign"].get("ranks") == ranks
    args, tables, _ = dropin.parse(["run", "fuzz/fuzz_x.py", *argv, "--ranks", "7"])
    assert args.ranks == 7  # --ranks wins at the launch (cli.py: args.ranks or campaign.ranks) ...
    assert tables["campaign"]["ranks"] == 7  # ... and in OUT/harness.toml, which a --resume runs


def test_a_harness_that_cannot_be_read_is_one_line(harness: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", unreadable)  # (root reads any file: no chmod would do)
    with pytest.raises(dropin.UsageError) as e:
        dropin.parse(["run", "fuzz/fuzz_x.py"])
    assert str(e.value) == "fuzz/fuzz_x.py: cannot be read (Permission denied)"


def test_the_command_refuses_with_exit_2(harness: Path, tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "symfence", "run", "fuzz/fuzz_x.py", "-seed=4"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stderr.startswith("symfence: -seed: a libFuzzer flag")
    assert len(run.stderr.strip().splitlines()) == 1


def test_dictionary_files(tmp_path: Path) -> None:
    good = tmp_path / "good.dict"
    good.write_text('# comment\n\nkw1="GET"\nkw2@1 = "\\x00\\xffA\\"\\\\"\n"plain"\n')
    assert read_tokens(good) == [b"GET", b"\x00\xffA\"\\", b"plain"]
    bad = tmp_path / "bad.dict"
    bad.write_text('kw="ok"\nnot a token\n')
    with pytest.raises(DictionaryError, match="line 2"):
        read_tokens(bad)
    cfg = parse_config({"campaign": {"targets": ["m:f"]}, "fuzz": {"dict": str(bad)}})
    with pytest.raises(PreflightError) as e:
        check_dictionary(cfg)
    assert e.value.key == "fuzz.dict"


def test_libfuzzer_only_calls_are_no_ops_in_a_plain_replay(tmp_path: Path) -> None:
    """instrument_all() rewrites every loaded function (seconds) and enable_python_coverage is
    gone from Atheris 3: in symfence's plain replays both are harmless, as are Setup and Fuzz
    called at module level (Fuzz() would start libFuzzer in the replay)."""
    from symfence.worker.concolic.replay import Verdict, replay_plain

    (tmp_path / "fuzz_old.py").write_text(textwrap.dedent('''
        import sys

        import atheris
        atheris.enable_python_coverage()
        atheris.instrument_all()

        @atheris.instrument_func
        def TestOneInput(data):
            with atheris.instrument_imports():
                import json
            if data == b"boom":
                raise RuntimeError("boom")

        atheris.Setup(sys.argv, TestOneInput)
        atheris.Fuzz()
    '''))
    sys.path.insert(0, str(tmp_path))
    try:
        crashed = replay_plain("fuzz_old:TestOneInput", b"boom", 5.0)
        fine = replay_plain("fuzz_old:TestOneInput", b"calm", 5.0)
    finally:
        sys.path.remove(str(tmp_path))
    assert crashed.verdict is Verdict.CRASHED and "RuntimeError: boom" in crashed.detail
    assert fine.verdict is Verdict.RAN_FINE


def test_a_harness_named_no_module_name_is_imported_through_a_link(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`python fuzz-parser.py` runs a file Python cannot import by that name: the campaign
    imports it as `fuzz_parser` through a link in OUT/harness/ (refused before: "'fuzz-parser' is
    not a module name"), with the harness's folder still on the path for what it imports."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    (tmp_path / "fuzz").mkdir()
    (tmp_path / "fuzz" / "sibling.py").write_text("WORD = b'ok'\n")
    (tmp_path / "fuzz" / "fuzz-parser.v2.py").write_text(
        "import sibling\n\ndef TestOneInput(data):\n    assert data != sibling.WORD\n")
    args, config = dropin.prepare(["run", "fuzz/fuzz-parser.v2.py"])
    cfg = parse_config(tomllib.loads(config.read_text()))
    assert cfg["campaign.targets"] == ["fuzz_parser_v2:TestOneInput"]
    assert Path(args.out) == Path("out/fuzz-parser.v2")
    links = tmp_path / "out" / "fuzz-parser.v2" / "harness"
    assert cfg["campaign.pythonpath"] == [str(links), str(tmp_path / "fuzz")]
    code = "import fuzz_parser_v2 as h; h.TestOneInput(b'x'); h.TestOneInput(b'ok')"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(import_path(cfg))}  # what `symfence run` sets
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/",
                         env=env)
    assert run.returncode == 1 and "AssertionError" in run.stderr, run.stderr  # imported, sibling too
    assert dropin.module_name(Path("2fuzz.py")) == "_2fuzz"
    assert dropin.module_name(Path("fuzz_x.py")) == "fuzz_x"


def test_the_tools_import_a_campaigns_targets_from_its_pythonpath(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`symfence replay OUT` and `status` of a drop-in campaign work from any folder: they put its
    `campaign.pythonpath` first, as the run did (before: `No module named 'fuzz_x'` unless run
    from the harness's folder, and always for a harness imported through a link)."""
    import json

    from symfence.coordinator.triage import reproduce_command
    from symfence.tools.campaign_dir import CampaignDir

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    out = tmp_path / "out"
    out.mkdir()
    (out / "campaign.json").write_text(json.dumps({"campaign": {"targets": ["fuzz_x:TestOneInput"],
                                                                "pythonpath": [str(tmp_path / "fuzz")]}}))
    CampaignDir.open(out)
    assert sys.path[0] == str(tmp_path / "fuzz")
    assert os.environ["PYTHONPATH"] == os.pathsep.join([str(tmp_path / "fuzz"), "/elsewhere"])
    line = reproduce_command("fuzz_x:TestOneInput", "/o/crash", [str(tmp_path / "fuzz")])
    assert line.startswith(f"PYTHONPATH={tmp_path / 'fuzz'} python -c ")
    assert reproduce_command("fuzz_x:TestOneInput", "/o/crash").startswith("python -c ")
