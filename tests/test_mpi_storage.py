"""Storage faults under real mpiexec: a full disk, a read-only folder, failed writes of each kind,
a deleted write-ahead log, an empty journal, a paused coordinator, restarts during deadlines, a
hung worker. Each run ends with one line and a non-zero exit, or recovers with no result lost
or doubled and no queue id reused."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from symfence.coordinator.journal import Journal
from tests.mpi_helpers import (
    ALL_OWED_FILES,
    OMPI_MPIEXEC,
    OMPI_PYTHON,
    ROOT,
    read_committed,
    run_campaign,
    synthetic_cfg,
)

pytestmark = pytest.mark.mpi


# --- checks --------------------------------------------------------------------------------


def one_line_error(run, code: int) -> str:
    """The run ended with exit `code` and exactly one `symfence:` line, the last on stderr."""
    assert run.code == code, f"exit {run.code}\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    lines = [l for l in run.stderr.splitlines() if l.startswith("symfence:")]
    assert len(lines) == 1, run.stderr[-3000:]
    assert run.stderr.rstrip().splitlines()[-1] == lines[0]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    return lines[0]


def check_complete(out: Path, seeds: int) -> list:
    """Every work item done exactly once; queue ids 0..n-1, each file its journal entry, once."""
    journal = Journal.read_only(out / "journal.sqlite")
    try:
        snap = journal.snapshot()
        corpus = list(journal.iter_corpus())
        assert snap.pending == snap.leased == snap.failed == 0, snap
        assert snap.done == snap.corpus == len(corpus) >= seeds
        assert sum(1 for e in corpus if e.origin == "seed") == seeds
        assert len({e.work_id for e in corpus}) == len({(e.target, e.sha256) for e in corpus}) == len(corpus)
        assert [e.queue_id for e in corpus] == list(range(len(corpus)))
        files: dict[int, str] = {}
        for path in (out / "queue").iterdir():
            if path.name.startswith("."):
                continue
            qid = int(path.name.split(",")[0].removeprefix("id:"))
            assert qid not in files, f"queue id {qid} used twice"
            files[qid] = hashlib.sha256(path.read_bytes()).hexdigest()
        assert files == {e.queue_id: e.sha256 for e in corpus}
        return corpus
    finally:
        journal.close()


def resume_to_the_end(tmp_path: Path, cfg, out: Path, seeds: int, **kw) -> None:
    final = run_campaign(tmp_path, cfg, ranks=3, out=out, extra_args=["--resume"], env=ALL_OWED_FILES, **kw)
    assert final.code == 0, final.stderr[-3000:]
    assert "work exhausted" in final.stdout and "VIOLATED" not in final.stdout
    s = final.stats()
    assert int(s["journal_fence_rejected"]) == 0
    check_complete(out, seeds)


def cfg_with_children(seeds: int, **extra):
    return synthetic_cfg(synthetic={"seeds": seeds, "task_ms": 1.0, "candidates": 1},
                         journal={"batch_ops": 32, "batch_ms": 20.0}, **extra)


@contextlib.contextmanager
def small_disk(path: Path, size: str):
    """A tmpfs of `size` at `path` (root only): a real disk that fills up or turns read-only."""
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}); the "
                    "failpoint tests below cover the same write paths")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def coordinator_pid(out: Path) -> int | None:
    path = out / "logs" / "coordinator.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "campaign.started":
                return e["pid"]
    return None


def when_committed(out: Path, n: int, action) -> threading.Thread:
    def wait() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if coordinator_pid(out) and read_committed(out) >= n:
                action()
                return
            time.sleep(0.02)

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    return t


# --- a full disk, a read-only folder, each failed write ---------------------------------------


def test_a_full_disk_stops_at_once_and_resume_continues_once_space_is_freed(tmp_path):
    seeds = 400
    cfg = cfg_with_children(seeds)
    with small_disk(tmp_path / "disk", "16m") as disk:
        out = disk / "out"
        ballast = disk / "ballast"
        ballast.write_bytes(b"\0" * ((16 << 20) - (160 << 10)))  # ~160 KB left: the journal fills it
        run = run_campaign(tmp_path, cfg, ranks=3, out=out)
        line = one_line_error(run, 3)
        assert "storage error" in line and "--resume" in line
        assert "No space left on device" in line or "full" in line, line
        assert "campaign finished" in run.stdout  # the summary is still printed
        # What is durable is consistent: every queue file is its journal entry.
        journal = Journal.read_only(out / "journal.sqlite")
        durable = {e.queue_id: e.sha256 for e in journal.iter_corpus()}
        journal.close()
        for path in (out / "queue").iterdir():
            if not path.name.startswith("."):
                qid = int(path.name.split(",")[0].removeprefix("id:"))
                assert durable[qid] == hashlib.sha256(path.read_bytes()).hexdigest()
        ballast.unlink()
        resume_to_the_end(tmp_path, cfg, out, seeds)


@pytest.mark.parametrize("point, code, words", [
    ("flush.before:4:ENOSPC", 3, ("journal.sqlite", "No space left")),  # the journal's flush
    ("stats:3:ENOSPC", 3, ("fuzzer_stats", "No space left")),  # fuzzer_stats
    ("queue:30:EIO", 3, ("queue", "Input/output error")),  # a queue/ file
    ("seed:1:EROFS", 3, ("Read-only file system",)),  # while seeding, before any dispatch
    ("commit:25:raise", 4, ("internal error", "RuntimeError")),  # anything else
])
def test_a_failed_write_or_any_exception_stops_with_one_line(tmp_path, point, code, words):
    seeds = 150
    cfg = cfg_with_children(seeds)
    out = tmp_path / "out"
    run = run_campaign(tmp_path, cfg, ranks=3, out=out, env={"SYMFENCE_FAILPOINT": point})
    line = one_line_error(run, code)
    assert all(w in line for w in words), line
    events = run.events()
    failed = [e for e in events if e["event"] == "campaign.failed"]
    assert len(failed) == 1 and "exception" in failed[0]  # the traceback is in the log file
    # Dispatching stopped at once: nothing was dispatched after the failure.
    after = events[events.index(failed[0]):]
    assert not [e for e in after if e["event"] in ("task.redispatched", "campaign.started")]
    resume_to_the_end(tmp_path, cfg, out, seeds)


def test_a_folder_turned_read_only_mid_run_stops_and_resume_continues(tmp_path):
    seeds = 1500
    cfg = cfg_with_children(seeds)
    # 3 ms tasks: the run must outlast the remount (a 1 ms run could end before it took effect).
    cfg["synthetic"]["task_ms"] = 3.0
    out = tmp_path / "out"
    queue = out / "queue"
    bound, mounted = threading.Event(), threading.Event()
    why: list[str] = []

    def read_only() -> None:  # a read-only bind mount over queue/ (root only)
        r = subprocess.run(["mount", "--bind", str(queue), str(queue)], capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            bound.set()
            for _ in range(100):  # "busy" while a queue file is open for writing: try again
                r = subprocess.run(["mount", "-o", "remount,bind,ro", str(queue)], capture_output=True, text=True,
                                   timeout=30)
                if r.returncode == 0:
                    mounted.set()
                    break
                time.sleep(0.005)
        why.append(r.stderr.strip() or f"exit {r.returncode}")

    watcher = when_committed(out, 200, read_only)
    try:
        run = run_campaign(tmp_path, cfg, ranks=3, out=out)
    finally:
        watcher.join(30)
        if bound.is_set():
            subprocess.run(["umount", str(queue)], capture_output=True, timeout=30)
    if not mounted.is_set():  # a failed remount is reported, not taken for a passed run
        pytest.skip(f"cannot bind-mount queue/ read-only here (not root?): {why}")
    line = one_line_error(run, 3)
    assert "Read-only file system" in line and "queue" in line, line
    resume_to_the_end(tmp_path, cfg, out, seeds)


def test_an_error_in_rank_0_before_the_campaign_ends_the_job_with_one_line(tmp_path):
    """A read-only logs/ folder: rank 0 fails before its event loop exists; the workers, already
    waiting for it, are stopped and the job ends (it used to hang forever)."""
    out = tmp_path / "out"
    logs = out / "logs"
    logs.mkdir(parents=True)
    r = subprocess.run(["mount", "--bind", str(logs), str(logs)], capture_output=True, timeout=30)
    if r.returncode:
        pytest.skip("cannot bind-mount here (not root?)")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(logs)], check=True, timeout=30)
        run = run_campaign(tmp_path, cfg_with_children(20), ranks=3, out=out, timeout_s=60)
    finally:
        subprocess.run(["umount", str(logs)], capture_output=True, timeout=30)
    line = one_line_error(run, 3)
    assert "Read-only file system" in line and "logs" in line, line


# --- a lost write-ahead log, a damaged journal ----------------------------------------------


def test_a_deleted_wal_loses_commits_but_no_queue_id_is_reused(tmp_path):
    seeds = 300
    cfg = cfg_with_children(seeds)
    out = tmp_path / "out"
    first = run_campaign(tmp_path, {**cfg, "campaign": {**cfg["campaign"], "max_results": 100}},
                         ranks=3, out=out)
    assert first.code == 0, first.stderr[-3000:]  # a clean stop checkpoints the WAL
    killed = run_campaign(tmp_path, cfg, ranks=3, out=out, extra_args=["--resume"],
                          env={"SYMFENCE_FAILPOINT": "flush.after:8"})
    assert killed.code != 0
    wal = out / "journal.sqlite-wal"
    assert wal.stat().st_size > 0
    journal = Journal.read_only(out / "journal.sqlite")
    with_wal = journal.snapshot().corpus
    journal.close()
    wal.unlink()
    (out / "journal.sqlite-shm").unlink(missing_ok=True)
    journal = Journal.read_only(out / "journal.sqlite")
    without_wal = journal.snapshot().corpus
    journal.close()
    on_disk = len([p for p in (out / "queue").iterdir() if not p.name.startswith(".")])
    assert without_wal < with_wal and on_disk > without_wal  # files beyond the journal
    # every owed queue file written at the end, however long it takes (ALL_OWED_FILES): a loaded
    # CI run's end-of-run budget left 569 of them to the next start, which check_complete counts
    final = run_campaign(tmp_path, cfg, ranks=3, out=out, extra_args=["--resume"], env=ALL_OWED_FILES)
    assert final.code == 0, final.stderr[-3000:]
    reconciled = [e for e in final.events() if e["event"] == "outputs.reconciled"]
    assert reconciled and reconciled[0]["readmitted"] > 0
    check_complete(out, seeds)
    orphaned = out / "orphaned" / "queue"
    for path in orphaned.iterdir() if orphaned.exists() else ():  # kept, never in queue/ twice
        assert path.is_file()


def test_an_empty_journal_is_refused_and_recover_rebuilds_from_the_files(tmp_path):
    seeds = 200
    cfg = cfg_with_children(seeds)
    out = tmp_path / "out"
    killed = run_campaign(tmp_path, cfg, ranks=3, out=out, env={"SYMFENCE_FAILPOINT": "commit:150"})
    assert killed.code != 0
    before = {p.name for p in (out / "queue").iterdir() if not p.name.startswith(".")}
    (out / "journal.sqlite").write_bytes(b"")  # a 0-byte journal (truncated, or never written)
    for side in ("-wal", "-shm"):
        Path(f"{out / 'journal.sqlite'}{side}").unlink(missing_ok=True)
    refused = run_campaign(tmp_path, cfg, ranks=3, out=out, extra_args=["--resume"], timeout_s=60)
    line = one_line_error(refused, 3)
    assert "damaged" in line and "0 bytes" in line and "symfence recover" in line
    assert (out / "journal.sqlite").stat().st_size == 0  # nothing was changed

    config = tmp_path / "campaign.toml"
    r = subprocess.run([sys.executable, "-m", "symfence", "recover", str(out), "--config", str(config)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert "rebuilt" in r.stdout and list(out.glob("journal.sqlite.damaged-*"))
    journal = Journal.read_only(out / "journal.sqlite")
    rebuilt = {f"id:{e.queue_id:06d}" for e in journal.iter_corpus()}
    journal.close()
    assert {name.split(",")[0] for name in before} <= rebuilt  # every file re-admitted
    resume_to_the_end(tmp_path, cfg, out, seeds)


# --- a paused coordinator, restarts during deadlines, retries ------------------------------


def test_a_paused_coordinator_drains_heartbeats_before_judging_its_workers(tmp_path):
    seeds = 1200
    cfg = synthetic_cfg(synthetic={"seeds": seeds, "task_ms": 2.0},
                        workers={"heartbeat_s": 0.1, "lost_after_s": 1.0},
                        dispatch={"deadline_s": 1.0, "max_attempts": 1})
    out = tmp_path / "out"

    def pause() -> None:
        pid = coordinator_pid(out)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(3.0)  # three times lost_after_s, and past every deadline
        os.kill(pid, signal.SIGCONT)

    when_committed(out, 100, pause)
    run = run_campaign(tmp_path, cfg, ranks=3, out=out)
    events = run.events()
    assert not [e for e in events if e["event"] in ("worker.lost", "task.failed")]
    assert run.code == 0, run.explain()
    assert "work exhausted" in run.stdout and "VIOLATED" not in run.stdout
    assert [e for e in events if e["event"] == "coordinator.paused"]
    s = run.stats()
    assert int(s["committed"]) == seeds and int(s["lost"]) == 0 and int(s["work_failed"]) == 0


def test_restarts_do_not_use_up_attempts_and_failed_work_can_be_retried(tmp_path):
    # Every item's first attempt blocks its worker 1.5 s, past the 0.75 s deadline: one charged
    # expiry each, then attempt 2 (1 ms) succeeds (max_attempts 2). A retry is not sent to a
    # worker still stuck in a revoked attempt (it would queue there and expire too, charged).
    # The coordinator is killed three times right after the flush that made the first two
    # leases durable, so the same items' leases are voided each time; voided leases must not
    # count, or those items would fail. Margins of 0.75 s both ways (the stuck attempt expires
    # first; a retry, the first task of a freshly started worker, answers in time) keep this
    # exact on a heavily loaded machine (0.25 s was exceeded at a load average near 200).
    seeds = 4
    cfg = synthetic_cfg(synthetic={"seeds": seeds, "task_ms": 1.0, "first_attempt_ms": 1500},
                        dispatch={"deadline_s": 0.75, "max_attempts": 2, "depth": 1})
    out = tmp_path / "out"
    kills = 0
    for i in range(3):  # flush 1 is the seeds' (or the resumed state's), flush 2 the leases'
        run = run_campaign(tmp_path, cfg, ranks=3, out=out, extra_args=["--resume"] if i else [],
                           env={"SYMFENCE_FAILPOINT": "flush.after:2"})
        kills += run.code != 0
    assert kills == 3
    final = run_campaign(tmp_path, cfg, ranks=3, out=out, extra_args=["--resume"])
    assert final.code == 0, final.stderr[-3000:]
    journal = Journal.read_only(out / "journal.sqlite")
    snap = journal.snapshot()
    items = [journal.work_item(e.work_id) for e in journal.iter_corpus()]
    journal.close()
    assert snap.failed == 0 and snap.done == seeds
    assert {item.attempts for item in items} == {1}  # exactly the one expiry each
    s = final.stats()
    # Each kill voids the two leases in flight, unless a loaded machine delayed that flush past
    # their deadline (they are then requeued, charged, before it): at least one kill voided both.
    assert int(s["voided"]) >= 2 and "VIOLATED" not in final.stdout

    # max_attempts 1: every item fails at its first expiry (stuck 1 s, deadline 0.25 s: only the
    # expiry has to be in time); --retry-failed runs them again.
    out2 = tmp_path / "out2"
    strict = synthetic_cfg(synthetic={"seeds": 2, "task_ms": 1.0, "first_attempt_ms": 1000},
                           dispatch={"deadline_s": 0.25, "max_attempts": 1, "depth": 1})
    run = run_campaign(tmp_path, strict, ranks=3, out=out2)
    journal = Journal.read_only(out2 / "journal.sqlite")
    assert journal.snapshot().failed == 2
    journal.close()
    patient = {**strict, "dispatch": {**strict["dispatch"], "deadline_s": 0.0}}
    run = run_campaign(tmp_path, patient, ranks=3, out=out2, extra_args=["--resume", "--retry-failed"])
    assert run.code == 0, run.explain()
    journal = Journal.read_only(out2 / "journal.sqlite")
    assert (journal.snapshot().failed, journal.snapshot().done) == (0, 2)
    journal.close()


# --- exit codes: a hung worker, every worker lost --------------------------------------------


def test_a_worker_hung_until_the_end_exits_with_code_6(tmp_path):
    # 1,500 seeds of 2 ms keep the campaign going for seconds after the freeze at 30 committed: with
    # 300 seeds a loaded machine let the worker acknowledge STOP before the freeze landed.
    cfg = synthetic_cfg(synthetic={"seeds": 1500, "task_ms": 2.0},
                        workers={"heartbeat_s": 0.1, "lost_after_s": 0.5})
    out = tmp_path / "out"

    def freeze() -> None:
        for line in (out / "logs" / "coordinator.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "worker.ready" and e["worker"] == 2:
                os.kill(e["pid"], signal.SIGSTOP)  # never thawed: mpiexec cleans it up

    when_committed(out, 30, freeze)
    run = run_campaign(tmp_path, cfg, ranks=3, out=out, env={"SYMFENCE_FINALIZE_TIMEOUT_S": "2"})
    assert run.code == 6, run.stderr[-3000:]  # ExitCode.RANKS_LOST: the job was aborted
    assert "work exhausted" in run.stdout and "VIOLATED" not in run.stdout
    assert int(run.stats()["committed"]) == 1500


@pytest.mark.skipif(OMPI_MPIEXEC is None, reason="needs the Open MPI venv (.venv-ompi, made by `make test`)")
def test_losing_every_worker_under_open_mpi_exits_non_zero(tmp_path):
    cfg = synthetic_cfg(synthetic={"seeds": 2000, "task_ms": 5.0},
                        workers={"heartbeat_s": 0.2, "lost_after_s": 30.0})
    out = tmp_path / "out"

    def kill_workers() -> None:
        for line in (out / "logs" / "coordinator.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "worker.ready":
                os.kill(e["pid"], signal.SIGKILL)

    when_committed(out, 40, kill_workers)
    run = run_campaign(tmp_path, cfg, ranks=3, out=out, timeout_s=120, mpiexec=OMPI_MPIEXEC,
                       python=OMPI_PYTHON, mpiexec_args=["--with-ft", "ulfm", "--oversubscribe", "--bind-to", "none"],
                       env={"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                            "OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,sm"})
    assert run.code != 0, run.stdout[-2000:]
    assert "campaign finished: all workers lost" in run.stdout
    journal = Journal.read_only(out / "journal.sqlite")
    assert journal.snapshot().leased == 0  # every lease was revoked and requeued
    journal.close()
