"""An unchanged Atheris harness runs under `symfence run fuzz_x.py corpus/ -flags`; the engine follows FDP.

The harness is written as OSS-Fuzz writes them (``instrument_all``, ``instrument_imports``,
``@instrument_func``, the legacy ``enable_python_coverage``, a helper module from its own
folder, ``atheris.Setup/Fuzz`` under ``__main__``) and plants two bugs behind values the
mutation stage does not guess in the budget: an exact 32-bit integer from
``ConsumeIntInRange`` (hashed before the comparison) and a keyword from ``ConsumeUnicode``
(checked as a masked 64-bit number), so that libFuzzer's comparison hooks cannot copy the constant into the
input). The drop-in command (a corpus
folder, libFuzzer flags) finds both; the fuzz stage alone, on the same budget, finds neither
(so the finds are the engine's, through its model of the FuzzedDataProvider).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.mpi_helpers import ROOT, run_job, stop_when

pytestmark = [pytest.mark.mpi, pytest.mark.heavy]

HELPER = '''
import atheris


class Provider(atheris.FuzzedDataProvider):
    def ConsumeMode(self):
        return self.ConsumeIntInRange(0, 3)
'''

HARNESS = '''
"""An OSS-Fuzz-style harness with two planted bugs."""
import sys

import atheris

with atheris.instrument_imports():
    import json
    from fuzz_helpers import Provider


class Planted(Exception):
    pass


class PlantedKeyword(Planted):  # another bug: another crash identity (type @ function)
    pass


MASK = 0x5A4C4B535C565F6C


@atheris.instrument_func
def TestOneInput(data):
    fdp = Provider(data)
    mode = fdp.ConsumeMode()
    if mode == 1:
        key = fdp.ConsumeIntInRange(0, 0xFFFFFFFF)
        if (key * 0x9E3779B1) & 0xFFFFFFFF == 0x5EEDF00D:  # a hashed key: one exact 32-bit value
            raise Planted("exact 32-bit integer")
    elif mode == 2:
        word = fdp.ConsumeUnicode(8)
        # the keyword "symfence", checked as a masked 64-bit number
        if word.isascii() and int.from_bytes(word.encode("ascii"), "little") ^ MASK == 0x3F2F25363A3B261F:
            raise PlantedKeyword("keyword")
        json.dumps(word)


atheris.instrument_all()
atheris.enable_python_coverage()


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
'''


def _run(folder: Path, *args: str, timeout_s: float = 120,
         until: Callable[[], bool] | None = None) -> subprocess.CompletedProcess:
    """`symfence run ARGS` in `folder`; with `until`, Ctrl-C (SIGINT to its process group) once it holds."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return run_job([sys.executable, "-m", "symfence", "run", *args], cwd=folder, env=env, timeout_s=timeout_s,
                   on_start=stop_when(until) if until is not None else None)


def _crashes(out: Path) -> list[str]:
    details = out / "crash_details"
    return sorted(p.read_text() for p in details.iterdir()) if details.is_dir() else []


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    (folder / "fuzz").mkdir(parents=True)
    (folder / "fuzz" / "fuzz_helpers.py").write_text(textwrap.dedent(HELPER))
    (folder / "fuzz" / "fuzz_planted.py").write_text(textwrap.dedent(HARNESS))
    corpus = folder / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "a").write_bytes(b"\x00")
    (corpus / "sub" / "b").write_bytes(b"hello\x02")
    (folder / "words.dict").write_text('kw1="null"\n"\\x00\\x01"\n')
    assert str(ROOT) not in str(folder)
    return folder


def test_drop_in_command_finds_both_planted_bugs(harness: Path) -> None:
    out = harness / "out"

    def both() -> bool:
        return all(word in "\n".join(_crashes(out)) for word in ("exact 32-bit integer", "keyword"))

    # the budget is a cap: Ctrl-C once both bugs are saved (about 8 s on a quiet machine: the
    # keyword at 0.7 s, the 32-bit integer, two engine rounds behind fuzz turns, at 6 s; 20 s found
    # neither twice in CI-like load, and 40 s took 34 s once in CI beside other tests)
    run = _run(harness, "fuzz/fuzz_planted.py", "corpus", "-max_total_time=60", "-timeout=2",
               "-rss_limit_mb=1500", "-dict=words.dict", "--ranks", "3", "--out", "out", "--no-status",
               until=both)
    assert run.returncode == 0, run.stderr[-3000:]
    text = "\n".join(_crashes(out))
    assert "exact 32-bit integer" in text and "keyword" in text, (run.stdout[-2000:],
                                                                  os.listdir(out / "crashes"))
    assert len(list((out / "seeds").iterdir())) == 2  # both corpus files, the nested one too
    cfg = (out / "harness.toml").read_text()
    assert "duration_s = 60.0" in cfg and "memory_limit_mb = 1500" in cfg and "exec_timeout_s = 2.0" in cfg


def test_the_fuzz_stage_alone_finds_neither_in_the_budget(harness: Path) -> None:
    (harness / "fuzz.toml").write_text(textwrap.dedent('''
        [campaign]
        targets = ["fuzz_planted:TestOneInput"]
        executor = "fuzz"
        seeds = "corpus"
        duration_s = 10
        ranks = 3
        [fuzz]
        slice_s = 2.0  # the budget is the same; at its end the drain waits for a turn (10 s by default)
    '''))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(harness / "fuzz")  # where `python fuzz_planted.py` would find it
    run = subprocess.run([sys.executable, "-m", "symfence", "run", "fuzz.toml", "--out", "out-fuzz",
                          "--no-status"], cwd=harness, env=env, capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "execs" in run.stdout
    text = "\n".join(_crashes(harness / "out-fuzz"))
    assert "exact 32-bit integer" not in text and "keyword" not in text


def test_unknown_libfuzzer_flag_is_refused_by_name(harness: Path) -> None:
    run = _run(harness, "fuzz/fuzz_planted.py", "corpus", "-runs=100", timeout_s=30)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "symfence: -runs: a libFuzzer flag symfence does not take (it takes -max_total_time, -timeout,"
        " -rss_limit_mb, -dict, -max_len, -jobs, -workers, -close_fd_mask, -print_final_stats)"]
