"""Ctrl-C during start-up stops quietly: one line, exit 130, no traceback, no stray ranks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.mpi_helpers import MPIEXEC
from tests.test_preflight import project

# The target module takes a few seconds to import, so a Ctrl-C sent one second in lands while
# the targets are being checked (in `symfence run`, or in rank 0 under plain mpiexec).
SLOW = "import time\ntime.sleep(4)\n\ndef target(data):\n    pass\n"


def _interrupt(cmd: list[str], cwd, after_s: float) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    time.sleep(after_s)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"did not stop after Ctrl-C\n{out}\n{err}")
    return proc.returncode, out, err


def test_ctrl_c_while_symfence_run_checks_targets(tmp_path):
    folder = project(tmp_path, ["slow:target"], {"slow": SLOW})
    code, out, err = _interrupt([sys.executable, "-m", "symfence", "run", "campaign.toml", "--out", "out"],
                                folder, 1.0)
    assert code == 130, err
    assert err.strip() == "symfence: interrupted (SIGINT) during start-up: nothing was launched"
    assert not (folder / "out").exists()


@pytest.mark.mpi
def test_ctrl_c_while_rank_0_starts_under_mpiexec(tmp_path):
    folder = project(tmp_path, ["slow:target"], {"slow": SLOW})
    code, out, err = _interrupt([MPIEXEC, "-n", "3", sys.executable, "-m", "symfence.coordinator", "--config",
                                 "campaign.toml", "--out", "out", "--no-status"], folder, 1.5)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "interrupted (SIGINT) during start-up: nothing was dispatched" in err
    assert code != 0
    assert not (folder / "out" / "journal.sqlite").exists()
