"""Harnesses as found in the wild: a test function not named TestOneInput (the one handed to
``atheris.Setup``), and ``atheris.Setup``/``atheris.Fuzz`` called at module level, not under
``__main__`` (coordinator/entrypoint.py, worker/atheris_compat.py). Before, `symfence run` refused
the first ("has no callable 'TestOneInput'") and the import check of the second started libFuzzer
on symfence's own command line ("The required directory ... does not exist")."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from symfence.coordinator import dropin
from symfence.coordinator.entrypoint import entry_point
from symfence.tools import ci_discover
from tests.mpi_helpers import ROOT, run_job, stop_when


@pytest.mark.parametrize("source, entry", [
    ("def TestOneInput(data):\n    pass\n", "TestOneInput"),
    # under main(), snake case (the most common other name)
    ("import sys, atheris\ndef test_one_input(data): pass\n"
     "def main():\n    atheris.Setup(sys.argv, test_one_input)\n    atheris.Fuzz()\n"
     "if __name__ == '__main__':\n    main()\n", "test_one_input"),
    # at module level
    ("import sys, atheris\ndef fuzz(data): pass\natheris.Setup(sys.argv, fuzz)\natheris.Fuzz()\n", "fuzz"),
    # what Setup is handed wins over the convention
    ("import sys, atheris\ndef TestOneInput(d): pass\ndef other(d): pass\natheris.Setup(sys.argv, other)\n",
     "other"),
    ("import sys\nfrom atheris import Setup as S, Fuzz\ndef go(d): pass\nS(sys.argv, go)\n", "go"),
    ("import sys\nimport atheris as a\ndef go(d): pass\na.Setup(sys.argv, go)\n", "go"),
    ("import sys, atheris\nasync def nope(d): pass\ndef go(d): pass\n"
     "atheris.Setup(sys.argv, test_one_input=go)\n", "go"),
    # a callback this rule cannot name: the convention, if defined
    ("import sys, atheris\ndef TestOneInput(d): pass\natheris.Setup(sys.argv, lambda d: TestOneInput(d))\n",
     "TestOneInput"),
    ("import sys, atheris\nimport lib\natheris.Setup(sys.argv, lib.fuzz)\n", None),
    # any name the module binds at its top level is `module:name`
    ("import sys, atheris\nfrom lib import fuzz\natheris.Setup(sys.argv, fuzz)\n", "fuzz"),
    ("import sys, atheris, functools\ndef f(d, n): pass\nfuzz = functools.partial(f, n=1)\n"
     "atheris.Setup(sys.argv, fuzz)\n", "fuzz"),
    ("import sys, atheris\nwith atheris.instrument_imports():\n    from lib import go\n"
     "atheris.Setup(sys.argv, go)\n", "go"),
    # a local of main() is not: the convention, if bound, else none
    ("import sys, atheris\ndef main():\n    cb = lambda d: None\n    atheris.Setup(sys.argv, cb)\n", None),
    ("import sys, atheris\nclass H:\n    def TestOneInput(self, d): pass\n", None),  # a method only
    ("from fuzz_x import TestOneInput\n\ndef test_it():\n    TestOneInput(b'')\n", None),  # a test module
    ("# TestOneInput in a comment\nx = 'atheris.Setup(sys.argv, f)'\n", None),
    ("import other\ndef f(d): pass\nother.Setup(sys.argv, f)\n", None),  # not atheris's Setup
    ("def TestOneInput(data)\n    pass\n", None),  # a syntax error: the import check says so
])
def test_the_entry_point_is_what_atheris_setup_is_handed(source: str, entry: str | None) -> None:
    assert entry_point(source) == entry


def test_discovery_and_the_drop_in_command_name_that_function(tmp_path: Path) -> None:
    (tmp_path / "fuzz_snake.py").write_text(SNAKE)
    (tmp_path / "lib.py").write_text("def Setup(a, b):\n    pass\n")
    assert ci_discover.is_harness(tmp_path / "fuzz_snake.py")
    assert ci_discover.entry_of(tmp_path / "fuzz_snake.py") == "fuzz_bytes"
    assert not ci_discover.is_harness(tmp_path / "lib.py")
    _, tables, _ = dropin.parse(["run", str(tmp_path / "fuzz_snake.py")])
    assert tables["campaign"]["targets"] == ["fuzz_snake:fuzz_bytes"]


SNAKE = '''\
"""Setup and Fuzz at module level, and a test function named otherwise: both seen in the wild."""
import sys

import atheris

with atheris.instrument_imports():
    import json


class Planted(Exception):
    pass


def fuzz_bytes(data):
    if data[:4] == b"bang":
        raise Planted("bang")
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        pass


atheris.Setup(sys.argv, fuzz_bytes)
atheris.Fuzz()
'''


def test_importing_a_module_level_fuzz_call_runs_nothing_once_plain(tmp_path: Path) -> None:
    # The real atheris in a fresh process: without plain(), the import starts libFuzzer.
    (tmp_path / "fuzz_snake.py").write_text(SNAKE)
    code = ("from symfence.worker import atheris_compat; atheris_compat.plain(); import fuzz_snake;"
            " fuzz_snake.fuzz_bytes(b'{}'); print('imported')")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    assert done.returncode == 0 and done.stdout.strip() == "imported", done.stderr[-2000:]


@pytest.mark.mpi
@pytest.mark.heavy
def test_a_wild_harness_runs_finds_and_replays(tmp_path: Path) -> None:
    (tmp_path / "fuzz_snake.py").write_text(textwrap.dedent(SNAKE))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a").write_bytes(b"bank")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def saved() -> bool:
        return (out / "crashes").is_dir() and any("Planted" in p.name for p in (out / "crashes").iterdir())

    run = run_job([sys.executable, "-m", "symfence", "run", "fuzz_snake.py", "corpus", "-max_total_time=20",
                   "--out", "out", "--no-status"], cwd=tmp_path, env=env, timeout_s=120,
                  on_start=stop_when(saved))
    assert run.returncode == 0, run.stderr[-3000:]
    assert 'targets = ["fuzz_snake:fuzz_bytes"]' in (out / "harness.toml").read_text()
    assert saved(), run.stdout[-3000:]
    assert "quarantined 0" in run.stdout and "task errors 0" in run.stdout, run.stdout[-3000:]
    # A plain replay of the saved crash imports the harness too: its module-level Fuzz() is a no-op there.
    replay = subprocess.run([sys.executable, "-m", "symfence", "replay", "out"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert replay.returncode == 1 and "still crashes" in replay.stdout, replay.stdout + replay.stderr
