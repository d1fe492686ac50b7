"""The coordinator's hot-path accounting (coordinator/hotpath.py) and the comparison benchmark."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from symfence.coordinator.hotpath import N_BUCKETS, SAMPLE, HotPath, LogHistogram, Phase
from tests.mpi_helpers import ROOT, run_campaign, synthetic_cfg


def test_histogram_quantiles_on_known_data():
    h = LogHistogram()
    for ms in range(1, 1001):  # 1 .. 1000 ms, uniform
        h.add(ms / 1000)
    assert h.n == 1000 and h.max == 1.0
    width = 2 ** (1 / 8)  # one bucket: the answer is within one bucket of the true quantile
    for q, true in ((0.5, 0.5), (0.9, 0.9), (0.99, 0.99), (0.01, 0.01)):
        got = h.quantile(q)
        assert true / width <= got <= true * width, (q, got)
    assert h.quantile(1.0) <= 1.0  # never above the largest value seen
    assert abs(h.total - sum(ms / 1000 for ms in range(1, 1001))) < 1e-9


def test_histogram_is_fixed_size_and_takes_any_value():
    h = LogHistogram()
    assert LogHistogram().quantile(0.5) == 0.0  # empty
    for x in (0.0, -1.0, 1e-12, 1e9, math.ldexp(1.0, -30), 3.5e-6):
        h.add(x)
    assert len(h.counts) == N_BUCKETS and sum(h.counts) == h.n == 6
    assert h.counts[0] == 4  # zero, negative and below the range all land in the first bucket
    assert h.counts[-1] == 1  # above the range: the last bucket
    assert 0 < h.quantile(0.99) <= 1e9
    lows = [LogHistogram.bounds(i) for i in range(N_BUCKETS)]
    assert all(lo < hi for lo, hi in lows)
    assert all(math.isclose(lows[i][1], lows[i + 1][0]) for i in range(N_BUCKETS - 1))  # contiguous


def test_a_skewed_latency_distribution():
    h = LogHistogram()
    for _ in range(980):
        h.add(0.002)
    for _ in range(20):
        h.add(0.300)
    assert 0.002 / 1.1 < h.quantile(0.5) < 0.002 * 1.1
    assert 0.300 / 1.1 < h.quantile(0.99) < 0.300 * 1.1


def test_accounting_counts_from_the_first_dispatch():
    hp = HotPath()
    hp.decode_ns = 5_000_000  # before dispatching: start-up, zeroed by begin()
    hp.mark("hellos")
    before = hp.items(committed=0)
    assert before["first_dispatch_time"] == 0 and before["coord_decode_s"] == 0.005 * SAMPLE
    files = [7.0]  # the writer's CPU in queue/ files so far: its part before begin() is not counted
    hp.files_cpu = lambda: files[0]
    hp.begin(committed=10)
    hp.decode_ns, hp.commit_ns, hp.dispatch_ns = 1_000_000, 2_000_000, 3_000_000  # of 1 in SAMPLE timed
    hp.ticker_ns = 4_000_000  # not sampled
    files[0] = 7.0005
    rows = hp.items(committed=110)  # 100 results this run
    assert rows["coord_queue_files_cpu_s"] == 0.0005 and rows["coord_queue_files_us_per_result"] == 5.0
    assert rows["coord_decode_us_per_result"] == 10.0 * SAMPLE
    assert rows["coord_commit_us_per_result"] == 20.0 * SAMPLE
    assert rows["coord_dispatch_us_per_result"] == 30.0 * SAMPLE
    assert rows["coord_ticker_us_per_result"] == 40.0
    assert rows["first_dispatch_time"] > 0 and rows["first_dispatch_s"] >= rows["startup_hellos_s"] >= 0
    hp.stopping(committed=60)  # 50 results in the window; the 50 committed after the stop (drain) are not in it
    hp.stopping(committed=100)  # only the first request counts
    assert hp.window_rate(110) == pytest.approx(50 / (hp.stop_requested - hp.first_dispatch))
    assert {f"coord_{p.value}_us_per_result" for p in Phase} <= set(rows)
    assert all(v >= 0 for v in rows.values())


@pytest.mark.mpi
def test_fuzzer_stats_carry_the_accounting(tmp_path):
    cfg = synthetic_cfg(campaign={"duration_s": 0}, synthetic={"seeds": 300, "task_ms": 0.0},
                        dispatch={"depth": 4})
    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=120)
    assert run.code == 0, run.explain()
    s = run.stats()
    assert int(s["committed"]) == 300
    keys = ["coord_process_cpu_s", "coord_loop_cpu_s", "coord_pump_cpu_s", "coord_writer_cpu_s",
            "coord_cpu_us_per_result", *(f"coord_{p.value}_us_per_result" for p in Phase),
            *(f"coord_{p.value}_s" for p in Phase if p not in (Phase.PUMP, Phase.WRITER, Phase.OTHER)),
            "window_results_per_sec", "commit_latency_p50_ms", "commit_latency_p99_ms", "commit_latency_max_ms",
            "first_dispatch_s", "startup_hellos_s", "startup_seeded_s",
            "process_start_time", "first_dispatch_time", "stop_requested_time"]
    missing = [k for k in keys if k not in s]
    assert not missing, missing
    assert all(float(s[k]) >= 0 for k in keys)
    assert int(s["commit_latency_count"]) == 300  # one latency per committed result
    assert 0 < float(s["commit_latency_p50_ms"]) <= float(s["commit_latency_p99_ms"]) \
        <= float(s["commit_latency_max_ms"]) * 1.1
    # Each phase and the pump were seen working (the journal writer may have had nothing to do
    # between the first dispatch and the end in so short a run: the last flush is rank 0's own).
    for k in ("coord_loop_cpu_s", "coord_pump_cpu_s", "coord_decode_s", "coord_commit_s", "coord_dispatch_s"):
        assert float(s[k]) > 0, k
    started = float(s["process_start_time"])
    assert started <= float(s["first_dispatch_time"]) <= float(s["stop_requested_time"])
    assert float(s["startup_hellos_s"]) <= float(s["startup_seeded_s"]) <= float(s["first_dispatch_s"])
    # Work exhausted: all 300 in the window (the two times are written rounded to the ms).
    window = float(s["stop_requested_time"]) - float(s["first_dispatch_time"])
    rate = float(s["window_results_per_sec"])
    assert 0.99 * 300 / (window + 0.002) <= rate <= 1.01 * 300 / max(window - 0.002, 1e-6)


@pytest.mark.mpi
def test_bench_compare_smoke(tmp_path):
    """The comparison runs end to end at tiny size: every system gets its row, numbers parse."""
    cmd = [sys.executable, "-m", "bench.bench_compare", "--only", "compare", "--duration", "0.3",
           "--depths", "4", "--seeds-per-s", "3000", "--results", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = json.loads((tmp_path / "compare.json").read_text())
    rows = {(r[0], str(r[1])): r for r in table["rows"]}
    assert set(rows) == {("bare msgpack farm", "1"), ("bare msgpack farm", "4"), ("MPIPoolExecutor", "1"),
                         ("symfence", "4"), ("symfence", "auto"), ("symfence, max_batch 1", "4")}
    for key in [("bare msgpack farm", "1"), ("bare msgpack farm", "4"), ("MPIPoolExecutor", "1"), ("symfence", "4"),
                ("symfence, max_batch 1", "4")]:
        assert float(rows[key][2].replace(",", "")) > 0, rows[key]  # results/s, not a FAILED cell
    sym = dict(zip(table["headers"], rows[("symfence", "4")]))
    assert float(sym["vs pool"].rstrip("x")) > 0 and float(sym["vs farm d4"].rstrip("%")) > 0
    assert float(sym["coord CPU us/result"].replace(",", "")) > 0 and float(sym["p99 ms"]) > 0
    assert "EXIT" not in sym["notes"], sym["notes"]  # the campaign itself ended cleanly
    auto = rows[("symfence", "auto")][2]
    assert auto.startswith("skipped: config does not accept") or float(auto.replace(",", "")) > 0
    assert "| symfence | 4 |" in (tmp_path / "compare.md").read_text()
