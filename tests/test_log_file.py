"""A log file on a full disk (/dev/full): the write error is recorded once, close never raises."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import structlog
from pathlib import Path
from symfence.coordinator import log
h = log.configure(Path("/dev/full"), console=None, rank=1, role="worker")
structlog.get_logger().info("worker.ready")   # the line-buffered write fails: recorded
log.close(h)                                  # flushing the same bytes again fails: not raised
try:
    log.check_file()
except OSError as exc:
    print("recorded", exc.errno)
"""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_a_log_on_a_full_disk_closes_without_raising_and_keeps_the_first_error():
    run = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stdout.split() == ["recorded", "28"]
