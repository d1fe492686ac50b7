"""Harnesses as found in the wild: a test function not named TestOneInput (the one handed to
``atheris.Setup``), ``atheris.Setup``/``atheris.Fuzz`` called at module level, not under
``__main__`` (protocol/entrypoint.py, worker/atheris_compat.py), and a mutator of the harness's
own handed to ``Setup`` (``custom_mutator=``, worker/fuzz/live_child.py). Before, `symfence run`
refused the first ("has no callable 'TestOneInput'"), the import check of the second started
libFuzzer on symfence's own command line ("The required directory ... does not exist"), and the
third fuzzed without its mutator: a crash behind zlib that Atheris finds in a second was not
found in 30 s."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from symfence.coordinator import dropin
from symfence.protocol.entrypoint import entry_point, setup_hooks
from symfence.tools import ci_discover
from tests.mpi_helpers import ROOT, logged, run_job, stop_when


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


@pytest.mark.parametrize("source, hooks", [
    ("import sys, atheris\ndef T(d): pass\ndef M(d, n, s): return d\n"
     "atheris.Setup(sys.argv, T, custom_mutator=M)\n", {"custom_mutator": "M"}),
    # under main(), both hooks, one a dotted path from a module-level name
    ("import sys, atheris\ndef T(d): pass\ndef main():\n"
     "    atheris.Setup(sys.argv, T, enable_python_coverage=True, custom_mutator=adapter.mutate,"
     " custom_crossover=X)\n", {"custom_mutator": "adapter.mutate", "custom_crossover": "X"}),
    # the call that hands over the test function, not an earlier one
    ("import sys, atheris\ndef T(d): pass\nif 0:\n"
     "    atheris.Setup(sys.argv, lambda d: 0, custom_mutator=A)\n"
     "atheris.Setup(sys.argv, T, custom_mutator=B)\n", {"custom_mutator": "B"}),
    # the convention's harness: its first Setup call
    ("import sys\nfrom atheris import Setup\ndef TestOneInput(d): pass\n"
     "Setup(sys.argv, lambda d: TestOneInput(d), custom_mutator=M)\n", {"custom_mutator": "M"}),
    # what cannot be named is left out; no Setup, no hooks
    ("import sys, atheris\ndef T(d): pass\natheris.Setup(sys.argv, T, custom_mutator=lambda d, n, s: d)\n",
     {}),
    ("import sys, atheris\ndef T(d): pass\natheris.Setup(sys.argv, T, custom_mutator=make())\n", {}),
    ("def TestOneInput(d): pass\n", {}),
    ("def TestOneInput(d)\n", {}),
])
def test_the_mutator_hooks_are_what_atheris_setup_is_handed(source: str, hooks: dict[str, str]) -> None:
    assert setup_hooks(source) == hooks


def test_the_fuzz_process_takes_the_hooks_from_the_module_and_outlives_their_failures(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    from symfence.worker.fuzz import HOOK_FAILED
    from symfence.worker.fuzz.live_child import _hooks

    (tmp_path / "fuzz_hooked.py").write_text(
        "import sys, atheris\ndef T(d): pass\nclass adapter:\n    pass\n"
        "def cross(a, b, n, seed):\n"
        "    return None if a == b'none' else a + b if a != b'boom' else 1 / 0\n"
        "def main():\n"
        "    atheris.Setup(sys.argv, T, custom_mutator=adapter.mutate, custom_crossover=cross)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import fuzz_hooked

    found = tmp_path / "found"
    found.mkdir()
    hooks = _hooks(fuzz_hooked, str(found))
    assert set(hooks) == {"custom_crossover"}  # adapter.mutate does not exist: fuzzed without it
    cross = hooks["custom_crossover"]
    assert cross(b"ab", b"cd", 3, 0) == b"abc"  # never more than max_out_size
    assert not (found / HOOK_FAILED).exists()
    assert cross(b"boom", b"cd", 10, 0) == b"boom"  # raised: the first parent stands in
    assert cross(b"none", b"cd", 2, 0) == b"no"  # no bytes: the same
    failed = (found / HOOK_FAILED).read_text()
    assert failed.count("custom_crossover:") == 1 and "ZeroDivisionError" in failed  # the first failure, once


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


def assert_clean(summary: str) -> None:
    """No task error, and nothing quarantined but late answers to dispatches whose deadline passed
    (a loaded machine's: seen once in CI with three test workers beside the campaign)."""
    counters = dict(re.findall(r"quarantined_(\w+)\s*: (\d+)", summary))
    assert counters and all(n == "0" for why, n in counters.items() if why not in ("results", "expired")), \
        summary[-3000:]
    assert "task errors 0" in summary, summary[-3000:]


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
    assert_clean(run.stdout)
    # A plain replay of the saved crash imports the harness too: its module-level Fuzz() is a no-op there.
    replay = subprocess.run([sys.executable, "-m", "symfence", "replay", "out"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert replay.returncode == 1 and "still crashes" in replay.stdout, replay.stdout + replay.stderr


ZLIB_HARNESS = '''\
"""A compressed input format and the harness's own mutator (the shape of Atheris's
custom_mutator example): libFuzzer's mutations of the compressed bytes never pass zlib's checksum."""
import sys
import zlib

import atheris

calls = [0]


class ZBomb(Exception):
    pass


def CustomMutator(data, max_size, seed):
    calls[0] += 1
    if calls[0] == 3:
        raise ValueError("the harness's mutator failed once")  # libFuzzer's mutation stands in
    try:
        plain = zlib.decompress(data)
    except zlib.error:
        plain = b"Hi"
    else:
        plain = atheris.Mutate(plain, len(plain) + 8)
    return zlib.compress(plain)


def TestOneInput(data):
    try:
        plain = zlib.decompress(data)
    except zlib.error:
        return
    if plain[:4] == b"ZBMB":
        raise ZBomb(plain)


def main():
    atheris.Setup(sys.argv, TestOneInput, custom_mutator=CustomMutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
'''


@pytest.mark.mpi
@pytest.mark.heavy
def test_a_harness_with_its_own_mutator_is_fuzzed_with_it(tmp_path: Path) -> None:
    (tmp_path / "fuzz_zlib.py").write_text(ZLIB_HARNESS)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def saved() -> bool:
        return (out / "crashes").is_dir() and any("ZBomb" in p.name for p in (out / "crashes").iterdir())

    run = run_job([sys.executable, "-m", "symfence", "run", "fuzz_zlib.py", "-max_total_time=40",
                   "--out", "out", "--no-status"], cwd=tmp_path, env=env, timeout_s=150,
                  on_start=stop_when(saved))
    assert run.returncode == 0, run.stderr[-3000:]
    assert saved(), run.stdout[-3000:]  # without the mutator: not in 40 s (Atheris with it: in a second)
    events = [e for rank in (1, 2) for e in logged(out, "fuzz.custom_hooks", f"worker-{rank}.jsonl")]
    assert events
    assert all(e["hooks"] == {"custom_mutator": "CustomMutator"} and not e["missing"] for e in events)
    failed = [e for r in (1, 2) for e in logged(out, "fuzz.custom_hook_failed", f"worker-{r}.jsonl")]
    assert failed and all("the harness's mutator failed once" in e["detail"] for e in failed)  # it went on
    assert "live_child" not in failed[0]["detail"]  # the harness's frames only
    assert_clean(run.stdout)
