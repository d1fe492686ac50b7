"""AFL++'s own tools (Debian afl++ 4.04c: afl-whatsup, afl-plot with gnuplot) read symfence's output,
before and after a --resume, and what they print matches fuzzer_stats."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest

from symfence.coordinator.afl import AFL_PLOT_COLUMNS
from symfence.coordinator.stats import read_stats
from tests.mpi_helpers import ROOT, run_campaign

pytestmark = pytest.mark.mpi

MISSING = [tool for tool in ("afl-whatsup", "afl-plot", "gnuplot") if shutil.which(tool) is None]
needs_afl = pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not installed (`make afl` installs"
                               " Debian's afl++ and gnuplot-nox as root)")

SHELL_ERRORS = re.compile(r"not found|syntax error|division by|bad number|Illegal number|unexpected", re.I)


def _cfg(**campaign) -> dict:
    cfg = tomllib.loads((ROOT / "configs" / "concolic.toml").read_text())
    cfg["campaign"].pop("output")
    cfg["campaign"].update(campaign)
    cfg["stats"] = {"interval_s": 0.1}
    return cfg


def whatsup(sync: Path, *flags: str) -> str:
    """afl-whatsup's full view (not -s); -d includes an instance that has ended."""
    r = subprocess.run(["afl-whatsup", *flags, str(sync)], capture_output=True, text=True, timeout=60,
                       env={"TERM": "dumb", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert not SHELL_ERRORS.search(r.stdout + r.stderr), r.stdout + r.stderr  # every line sourced cleanly
    return r.stdout


def plot(out: Path, dest: Path) -> None:
    r = subprocess.run(["afl-plot", str(out), str(dest)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "All done" in r.stdout, r.stdout
    assert "warning" not in r.stderr.lower(), r.stderr  # gnuplot found numbers in every column it plots
    for name in ("high_freq.png", "low_freq.png", "exec_speed.png", "edges.png"):
        png = (dest / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000, name


def plot_rows(out: Path) -> list[list[str]]:
    lines = (out / "plot_data").read_text().splitlines()
    header = [c.strip() for c in lines[0].lstrip("# ").split(",")]
    assert header[:13] == list(AFL_PLOT_COLUMNS)  # AFL++'s order; symfence's columns after
    return [[c.strip() for c in line.split(",")] for line in lines[1:]]


def check_whatsup_matches(text: str, stats: dict[str, str]) -> None:
    """The -d view of an ended campaign against its final fuzzer_stats."""
    assert f">>> concolic (0 days, 0 hrs) fuzzer PID: {stats['fuzzer_pid']} <<<" in text
    crashes = int(stats["saved_crashes"])
    assert crashes > 0 and f"crashes saved {crashes} (!)" in text
    assert f"coverage {stats['bitmap_cvg']}" in text
    assert f"items {stats['cur_item']}/{stats['corpus_count']}" in text
    assert f"pending 0/{stats['pending_total']}" in text  # pending_favs is 0: symfence marks no favourites
    assert f"cycles {int(stats['cycles_done']) + 1}," in text
    assert "last_hang       : none seen yet" in text  # no hangs in the three planted-bug targets
    assert f"Crashes saved : {crashes}" in text


class LiveWhatsup:
    """Runs afl-whatsup (live, full view) on the running campaign once it has found a crash and
    run `min_run_time` seconds of campaign time, then stops it with Ctrl-C (SIGINT to the job's
    process group, as a terminal would): no dependence on how fast a loaded machine fuzzes."""

    def __init__(self, sync: Path, out: Path, min_run_time: int) -> None:
        self.text = ""
        self.sync, self.out, self.min_run_time = sync, out, min_run_time
        try:
            self.old_pid = read_stats(out / "fuzzer_stats")["fuzzer_pid"]  # a resumed campaign's last run
        except OSError:
            self.old_pid = None
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def start(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.thread.start()

    def _watch(self) -> None:
        while self.proc.poll() is None:
            try:
                stats = read_stats(self.out / "fuzzer_stats")
            except OSError:
                stats = {}
            if stats.get("fuzzer_pid") not in (None, self.old_pid) and int(stats.get("saved_crashes", 0)) \
                    and int(stats.get("last_find", 0)) and int(stats.get("run_time", 0)) >= self.min_run_time:
                self.text = whatsup(self.sync)
                os.killpg(self.proc.pid, signal.SIGINT)
                return
            time.sleep(0.1)

    def check(self) -> None:
        self.thread.join(timeout=60)
        text = self.text
        assert text, "the campaign ended before afl-whatsup could look at it"
        assert "Fuzzers alive : 1" in text, text
        assert re.search(r"last_find\s+: \d+ (second|minute)", text), text  # a time, not "none seen yet"
        assert re.search(r"last_crash\s+: \d+ (second|minute)", text), text
        assert re.search(r"cycles \d+, lifetime speed \d+ execs/sec, items \d+/\d+ \(\d+%\)", text), text
        assert re.search(r"pending \d+/\d+, coverage \d+\.\d\d%, crashes saved \d+ \(!\)", text), text


@needs_afl
def test_afl_whatsup_and_afl_plot_read_a_campaign_and_its_resume(tmp_path):
    sync = tmp_path / "sync"  # afl-whatsup wants the sync dir that holds the instance
    out = sync / "symfence"
    # The extended targets keep the engine busy; the watcher stops each run with Ctrl-C.
    targets = tomllib.loads((ROOT / "configs" / "extended.toml").read_text())["campaign"]["targets"]
    live = LiveWhatsup(sync, out, min_run_time=2)
    first = run_campaign(tmp_path, _cfg(targets=targets, duration_s=240.0), ranks=3, out=out, timeout_s=300,
                         on_start=live.start)
    assert first.code == 0, first.stderr[-2000:]
    live.check()
    s1 = read_stats(out / "fuzzer_stats")
    rows1 = plot_rows(out)
    assert len(rows1) >= 2
    check_whatsup_matches(whatsup(sync, "-d"), s1)
    plot(out, tmp_path / "plot1")

    live = LiveWhatsup(sync, out, min_run_time=int(s1["run_time"]) + 2)
    second = run_campaign(tmp_path, _cfg(targets=targets, duration_s=240.0), ranks=3, out=out,
                          extra_args=["--resume"], timeout_s=300, on_start=live.start)
    assert second.code == 0, second.stderr[-2000:]
    live.check()
    s2 = read_stats(out / "fuzzer_stats")
    # carried over (as AFL++ does): start_time is this run's start moved back by the earlier run
    # time, so start_time + run_time is now; and the totals only grow
    assert int(s1["start_time"]) <= int(s2["start_time"]) < int(s1["last_update"]) + 120
    assert abs(int(s2["start_time"]) + int(s2["run_time"]) - int(s2["last_update"])) <= 15  # start-up and drain of a loaded machine sit between the clocks
    assert int(s2["run_time"]) >= int(s1["run_time"]) + 2
    assert int(s2["execs_done"]) > int(s1["execs_done"])
    assert int(s2["total_crashes"]) >= int(s1["total_crashes"]) > 0
    assert int(s2["saved_crashes"]) >= int(s1["saved_crashes"])
    assert int(s2["corpus_count"]) >= int(s1["corpus_count"])
    rows2 = plot_rows(out)
    assert rows2[: len(rows1)] == rows1  # appended, not restarted
    times = [int(r[0]) for r in rows2]
    assert times == sorted(times) and times[-1] >= int(s1["run_time"]) + 2  # the time axis continues
    assert [int(r[11]) for r in rows2] == sorted(int(r[11]) for r in rows2)  # total_execs too
    check_whatsup_matches(whatsup(sync, "-d"), s2)
    plot(out, tmp_path / "plot2")
    check_sourceable(out / "fuzzer_stats")
    check_symfence_plot(out, targets)


def check_sourceable(path: Path) -> None:
    """afl-whatsup turns every `key : value` line into a shell assignment and sources it."""
    for line in path.read_text().splitlines():
        key, _, value = line.partition(":")
        assert re.fullmatch(r"[a-z_][a-z0-9_]*", key.strip()), line
        if key.strip() != "command_line":  # afl-whatsup skips that one
            assert not re.search(r"[\"`$\\]", value), line


def check_symfence_plot(out: Path, targets: list[str]) -> None:
    """`symfence plot` draws the same (resumed) campaign with matplotlib, per target too."""
    r = subprocess.run([sys.executable, "-m", "symfence", "plot", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    names = {Path(line).name for line in r.stdout.split()}
    assert {"coverage.png", "execs.png", "corpus.png", "findings.png", "quarantine.png",
            "targets_edges_found.png", "targets_corpus_count.png"} <= names, names
    for name in names:
        assert (out / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = (out / "plot_targets").read_text().splitlines()[1:]
    assert {row.split(", ")[1] for row in rows} == set(targets)  # one row per target per interval
