"""bench_harnesses --file: a harness of the user's, wherever it is, measured as the bundled ones are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import bench_harnesses as bh


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bh, "EXTRA", dict(bh.EXTRA))
    monkeypatch.setattr(bh, "ENTRIES", {})
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")


def test_a_file_is_named_by_its_stem_and_its_function_by_its_setup_call(tmp_path: Path, clean: None) -> None:
    harness = tmp_path / "fuzz_mine.py"
    harness.write_text("import sys, atheris\ndef fuzz(data):\n    fdp = atheris.FuzzedDataProvider(data)\n"
                       "atheris.Setup(sys.argv, fuzz)\n")
    assert bh.add_file(f"{harness}:mylib") == "fuzz_mine"
    assert bh._spec("fuzz_mine") == "fuzz_mine:fuzz"
    assert bh.EXTRA["fuzz_mine"] == ("mylib", True, tmp_path, None)
    assert os.environ["PYTHONPATH"] == f"{tmp_path}{os.pathsep}/elsewhere"
    assert bh._spec("fuzz_toml") == "examples.harnesses.fuzz_toml:TestOneInput"  # the bundled ones as before


@pytest.mark.parametrize("arg", ["nowhere.py:pkg", "{h}", "{h}:", "{dir}:pkg", "{toml}:toml"])
def test_a_bad_file_argument_is_one_line(tmp_path: Path, clean: None, arg: str) -> None:
    (tmp_path / "fuzz_x.py").write_text("def TestOneInput(d): pass\n")
    (tmp_path / "fuzz_toml.py").write_text("def TestOneInput(d): pass\n")  # a bundled harness's name
    with pytest.raises(SystemExit, match="--file"):
        bh.add_file(arg.format(h=tmp_path / "fuzz_x.py", dir=tmp_path, toml=tmp_path / "fuzz_toml.py"))


def test_repeated_runs_of_a_harness_stand_as_their_median() -> None:
    runs = [{"lines_ratio": x, "execs_ratio": e, "hybrid": {"engine_share": s}}
            for x, e, s in ((0.64, 1.0, 0.3), (1.10, 0.9, 0.2), (0.90, 1.2, 0.1))]
    median = bh._median_of(runs)
    assert median["lines_ratio"] == 0.90 and median["hybrid"]["engine_share"] == 0.1  # the median run
    assert median["execs_ratio"] == 1.0  # each ratio's own median
    assert [r["lines_ratio"] for r in median["repeats"]] == [0.64, 1.10, 0.90]
