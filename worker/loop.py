"""The worker loop: a local FIFO of WORK (up to the dispatch depth), one task at a time.

Re-runs the campaign waits on (``RERUN_BOUND``: a claim's confirmation) go to the queue's front,
and the running fuzz turn or engine task ends early for them (``Turns``): a find is confirmed in
about a second, not after the tasks ahead of it. When both stages run, a task that has run for
SETUP's ``turn_s`` ends early too once any task waits behind it. After YIELD
(the campaign's drain) every task ends early that way, so what it found is committed instead of
cancelled at the stop.

The loop never blocks in MPI: it drains messages, starts the next task, waits on the running
executor (blocking, for up to RUNNING_WAIT_S: the coordinator keeps the next WORK queued here,
so nothing waits on MPI meanwhile), heartbeats, and repeats. With nothing to run it backs off
to `workers.poll_cap_ms`, and sleeps without spinning when this host's ranks outnumber its
cores, so idle ranks leave the cores to busy ones. Tokens are checked
on arrival (a WORK without a valid token is refused and counted); every answer goes through the
single `ResultSender`.
"""

from __future__ import annotations

import collections
import os
import socket
import time
import traceback
from typing import Any, Callable

import structlog

from symfence.protocol.backoff import Backoff, crowded, spins_for_host
from symfence.protocol.childenv import put_first_on_path
from symfence.protocol.codec import RemoteProtocolError, decode_control, decode_work_frame, encode
from symfence.protocol.coverage import CoverageMap, pack_trace
from symfence.protocol.ids import DispatchToken, sha256_hex
from symfence.protocol.messages import RERUN_BOUND, Candidate, Control, ControlKind, Cost, Result, Status, Tag, Work
from symfence.protocol.rules import DEFAULT_LIMITS, INFO_TEXT_BYTES, MAX_BATCH, Limits
from symfence.worker.endpoint import Endpoint
from symfence.worker.engine_api import Executor, Outcome, Task, Turns
from symfence.worker.executors import make_executor
from symfence.worker.faults import FaultInjector
from symfence.worker.hostcheck import verify
from symfence.worker.logforward import LogForwarder
from symfence.worker.sender import ResultSender

log = structlog.get_logger()
COORDINATOR = 0
# How long a worker with a task running blocks on it before looking at MPI again: the most a
# CANCEL or STOP of that task waits to be seen (a fault-injection run keeps the poll cap). On a
# crowded host (more than 2 ranks per core) waits are longer: 256 ranks waking every 20 ms are
# 12,800 wake-ups a second, most of a core taken from the ranks with work.
RUNNING_WAIT_S = 0.02
CROWDED_RUNNING_WAIT_S = 0.2
CROWDED_IDLE_CAP_S = 0.1  # an idle worker's longest sleep there (workers.poll_cap_ms if longer)
EXIT_ORPHANED = 7  # the worker heard nothing from rank 0 for workers.orphan_after_s and ended itself


class Worker:
    def __init__(self, world: Endpoint, peers: Endpoint, configure_log: Callable[[str, int], None]) -> None:
        self.world = world
        self.peers = peers
        self.rank = world.rank
        self.configure_log = configure_log
        self.queue: collections.deque[Work] = collections.deque()
        self.running: Work | None = None
        self.running_executor: Executor | None = None
        self.winding_down = False  # YIELD heard: every task answers as soon as it can
        self._ended: Work | None = None  # the running task asked to end early (end_turn)
        self.executors: dict[str, Executor] = {}
        self.coverage = CoverageMap()
        self.sender = ResultSender(lambda frame: self.world.send(COORDINATOR, Tag.RESULT, frame))
        self.faults: FaultInjector | None = None
        self.limits: Limits = DEFAULT_LIMITS  # the campaign's, from SETUP: what WORK and RESULT may hold
        self.stopping = False
        self.heartbeat_s = 1.0
        self.backoff = Backoff(cap_s=0.002)
        self.running_wait_s = RUNNING_WAIT_S
        self.hold_s = 0.0  # how long a finished result may wait for the next to share its frame
        self.counters: collections.Counter[str] = collections.Counter()
        self.busy_s = 0.0
        self.work_received = 0
        self.max_held = 0  # most dispatches held at once (queued + running): at most the depth
        self.beat_now = False  # a CANCEL was handled: tell the coordinator soon what is still held
        self.heard_at = time.monotonic()  # when rank 0 was last heard from (anything it sent)
        self.orphan_after_s = 0.0  # end this worker after hearing nothing that long (0 = never)
        self.orphaned = False
        # Its warnings and errors also go to rank 0 (cli passes this to the log's configure).
        self.log_forwarder = LogForwarder(lambda info: self.world.send(
            COORDINATOR, Tag.CONTROL, encode(Control(ControlKind.LOG, info=info))))

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> int:
        self.world.send(COORDINATOR, Tag.CONTROL, encode(Control(ControlKind.HELLO, info={
            "host": socket.gethostname(), "pid": os.getpid(), "max_batch": MAX_BATCH})))
        setup = self._await_setup()
        if setup is None:
            self.world.flush()
            return 0
        log_path = self._log_path(setup)
        self.configure_log(log_path, self.rank)
        put_first_on_path([str(p) for p in setup.get("pythonpath") or ()])  # before any target is imported
        self.limits = self.sender.limits = Limits.from_info(setup)
        self._check_host(setup, log_path)
        self.heartbeat_s = float(setup["heartbeat_s"])
        self.orphan_after_s = float(setup.get("orphan_after_s", 0.0))
        self.turn_s = float(setup.get("turn_s", 0.0))  # see `_turn_over`
        self.yield_s = {str(k): float(v) for k, v in dict(setup.get("yield_s") or {}).items()}
        cap_s = float(setup["poll_cap_ms"]) / 1000
        busy = crowded()
        self.backoff = Backoff(cap_s=max(cap_s, CROWDED_IDLE_CAP_S) if busy else cap_s, spins=spins_for_host())
        # Results share frames (mpi.max_batch, mpi.hold_ms), except under fault injection, whose
        # faults are made per result frame.
        self.sender.max_batch = 1 if setup.get("faults") else int(setup.get("max_batch", 1))
        self.hold_s = float(setup.get("hold_ms", 0.0)) / 1000
        if setup.get("faults"):
            self.faults = FaultInjector(setup["faults"], self.world, self.peers,
                                        int(setup["world_size"]), self.limits.max_message_bytes)
        self.running_wait_s = cap_s if self.faults else max(cap_s, CROWDED_RUNNING_WAIT_S if busy else RUNNING_WAIT_S)
        log.info("worker.started", faults=bool(self.faults))
        try:
            self._serve()
        finally:
            for ex in self.executors.values():
                ex.close()
        if self.orphaned:
            return EXIT_ORPHANED  # nobody to tell: no STOP_ACK, no MPI_Finalize (cli exits at once)
        self.sender.flush()
        if self.faults is not None:
            self.faults.at_stop()
        info: dict[str, Any] = {"results_sent": self.sender.sent, "result_frames": self.sender.frames,
                                "results_unsendable": self.sender.unsendable, "busy_s": round(self.busy_s, 6),
                                "work_received": self.work_received, "max_held": self.max_held, **self.counters}
        if self.faults is not None:
            info["faults"] = dict(self.faults.counts)
        self.world.send(COORDINATOR, Tag.CONTROL, encode(Control(ControlKind.STOP_ACK, info=info)))
        self.world.flush()
        log.info("worker.finished", **{k: v for k, v in info.items() if k != "faults"}, faults=info.get("faults"))
        return 0

    def _log_path(self, setup: dict[str, Any]) -> str:
        """The output folder's logs/ (setup's log_path), or this host's scratch folder
        (workers.scratch_dir, `~` and $VARS expanded here): symfence-<epoch>/worker-<rank>.jsonl."""
        scratch = setup.get("scratch_dir") or ""
        if not scratch:
            return setup["log_path"]
        folder = os.path.expandvars(os.path.expanduser(scratch))
        return os.path.join(folder, f"symfence-{setup['epoch']}", f"worker-{self.rank}.jsonl")

    def _check_host(self, setup: dict[str, Any], log_path: str) -> None:
        """Hash the files rank 0 listed; answer with this host, the log's path and the first bad file."""
        files = setup.get("files") or {}
        bad = verify(files)
        info: dict[str, Any] = {"host": socket.gethostname()[:INFO_TEXT_BYTES], "files_checked": len(files),
                                "log_path": os.path.abspath(log_path)[-INFO_TEXT_BYTES:],
                                "bad_file": bad[0] if bad else 0, "why": bad[1] if bad else ""}
        if bad:
            log.error("worker.host_mismatch", path=sorted(files)[bad[0] - 1], why=bad[1])
        self.world.send(COORDINATOR, Tag.CONTROL, encode(Control(ControlKind.CHECKED, info=info)))

    def _await_setup(self) -> dict[str, Any] | None:
        backoff = Backoff(cap_s=0.01, spins=spins_for_host())
        while True:
            # One message at a time: WORK may follow SETUP closely and must stay queued in MPI.
            for _src, tag, frame in self.world.poll(COORDINATOR, limit=1):
                if tag != Tag.CONTROL:
                    self.counters["dropped_before_setup"] += 1
                    continue
                ctl = decode_control(frame)
                if ctl.kind is ControlKind.SETUP:
                    return dict(ctl.info)
                if ctl.kind is ControlKind.STOP:
                    return None
            delay = backoff.next_delay()
            time.sleep(delay) if delay else os.sched_yield()

    def _serve(self) -> None:
        next_heartbeat = time.monotonic()
        while not self.stopping:
            progressed = self._receive()
            if self.faults is not None:
                progressed |= self.faults.serve_peers()
            if self.running is None and self.queue and not self.stopping:
                self._start(self.queue.popleft())
                progressed = True
            until = self._flush_held(next_heartbeat)
            if self.running is not None and self._ended is not self.running and (
                    self.winding_down or (self.queue and (self.queue[0].bound >= RERUN_BOUND
                                                          or self._turn_over()))):
                self._end_turn()  # again until it takes (an engine's child: once it runs the task)
            if self.running is not None:
                # Sleep in the executor, not in a spin: whatever arrives meanwhile only queues.
                outcome = self._wait(max(0.0, min(self.running_wait_s, until - time.monotonic())))
                if outcome is not None:
                    self._receive()  # what arrived meanwhile (a CANCEL of this task wins)
                    if self.running is not None:
                        self._finish(outcome)
                    progressed = True
            if progressed:
                self.backoff.reset()
            elif self.running is None:
                delay = self.backoff.next_delay()
                time.sleep(delay) if delay else os.sched_yield()
            now = time.monotonic()
            if self.orphan_after_s and now - self.heard_at > self.orphan_after_s:
                self._orphan(now)
                return
            if now >= next_heartbeat or self.beat_now:
                next_heartbeat = now + self.heartbeat_s
                self.beat_now = False
                self.sender.flush()  # a held result is no longer held work: answered before the beat
                self._heartbeat()

    def _flush_held(self, wake_at: float) -> float:
        """Send the held results unless holding them on costs nothing; returns when to look again
        (`wake_at`, or sooner when a held result's time runs out).

        Held results are sent at once when there are `max_held // 2` of them (at most
        `max_batch`), when no task runs (the worker would wait for the refill), or when the
        oldest was held `hold_s`. So at depth 4 results go two to a frame and the refill comes
        two to a frame, while the other two dispatches run; sending a result alone as soon as
        fewer than two waited queued made 1.3 results per frame with no-op tasks, and gained
        nothing in utilisation with 1 ms tasks (bench_compare util, 2026-12-06: 89.0% and 88.8%
        at depth 4). At depth 3 or less, or with `max_batch` 1, nothing is held."""
        held = self.sender.held
        if not held:
            return wake_at
        share = max(1, min(self.max_held // 2, self.sender.max_batch))
        now = time.monotonic()
        due = self.sender.held_since + self.hold_s
        if len(held) >= share or self.running is None or now >= due:
            self.sender.flush()
            return wake_at
        return min(wake_at, due)

    def _orphan(self, now: float) -> None:
        """Rank 0 has been silent too long (its host gone, or this host cut off): stop everything."""
        self.orphaned = True
        log.error("worker.orphaned", silent_s=round(now - self.heard_at, 3), limit_s=self.orphan_after_s,
                  queued=len(self.queue), running=self.running is not None)
        if self.running is not None:
            self.running_executor.abort()
            self.running = None
        self.queue.clear()

    # ------------------------------------------------------------------ messages in

    def _receive(self) -> bool:
        msgs = self.world.poll(COORDINATOR)
        if msgs:
            self.heard_at = time.monotonic()
        for _src, tag, frame in msgs:
            if tag == Tag.WORK:
                self._on_work(frame)
            elif tag == Tag.CONTROL:
                self._on_control(frame)
            else:
                self.counters["unexpected_tag"] += 1
        return bool(msgs)

    def _on_work(self, frame: bytes) -> None:
        """A WORK frame: its one WORK, or a batch of them, each queued on its own."""
        try:
            works = decode_work_frame(frame, self.limits)
        except RemoteProtocolError as exc:
            works = [exc]
        for work in works:
            self._queue_work(work)

    def _queue_work(self, work: Work | RemoteProtocolError) -> None:
        self.work_received += 1
        if isinstance(work, RemoteProtocolError):
            # Without a valid token there is nobody to answer to: refuse, log, count.
            self.counters["work_refused"] += 1
            log.warning("work.refused", reason=work.reason.value, detail=work.detail)
            return
        if work.cov_delta:
            try:
                self.coverage.apply_delta(work.cov_version, work.cov_delta)
            except ValueError as exc:
                self.counters["bad_cov_delta"] += 1
                log.warning("coverage.bad_delta", error=str(exc))
        if self.faults is not None and self.faults.drop_work(work.token):
            return
        if work.bound >= RERUN_BOUND:
            self._run_soon(work)
        else:
            self.queue.append(work)
        self.max_held = max(self.max_held, len(self.queue) + (self.running is not None))

    def _run_soon(self, work: Work) -> None:
        """A re-run the campaign waits on (a claimed crash's confirmation): queued ahead of all
        but earlier re-runs (`_serve` then ends the running task early for it)."""
        ahead = 0
        while ahead < len(self.queue) and self.queue[ahead].bound >= RERUN_BOUND:
            ahead += 1
        self.queue.insert(ahead, work)

    def _turn_over(self) -> bool:
        """Whether the running task has had its turn (`turn_s`, from SETUP: both stages run) while
        a task waits behind it: then it ends early like a fuzz turn (an engine task hands back the
        branches it did not try), and the next runs. Behind a task of its own stage too: a rank
        whose slots all held engine tasks ran one for 35 s while the fuzz stage was behind its
        share (email-validator), as its answer is what frees a slot for the share to decide."""
        assert self.running is not None
        ran = time.monotonic() - self._t0
        if 0 < self.turn_s <= ran:
            return True
        least = self.yield_s.get(self.running.executor, 0.0)  # a fuzz turn, for the other stage
        return 0 < least <= ran and self.queue[0].executor != self.running.executor

    def _end_turn(self) -> None:
        """Ask the running task to answer early with what it has (``Turns``: a fuzz turn, an
        engine task); once it agrees, it is not asked again."""
        running = self.running_executor if self.running is not None else None
        if isinstance(running, Turns) and running.end_turn():
            self.counters["turns_ended_early"] += 1
            self._ended = self.running

    def _on_control(self, frame: bytes) -> None:
        try:
            ctl = decode_control(frame, self.limits)
        except RemoteProtocolError as exc:
            self.counters["control_refused"] += 1
            log.warning("control.refused", reason=exc.reason.value, detail=exc.detail)
            return
        if ctl.kind is ControlKind.CANCEL:
            for token in ctl.tokens:
                self._cancel(token)
            # The coordinator counts a cancelled dispatch against this rank's slots until a
            # heartbeat shows it gone: send one now, not a heartbeat period later.
            self.beat_now = True
        elif ctl.kind is ControlKind.HEARTBEAT:
            pass  # rank 0 is there (heard_at is set for anything it sends)
        elif ctl.kind is ControlKind.YIELD:
            # The campaign is ending (the drain): what runs, and what starts from now on, answers
            # with what it has instead of being cancelled at the stop with its work lost.
            self.winding_down = True
        elif ctl.kind is ControlKind.STOP:
            self.stopping = True
            for work in self.queue:
                log.info("task.dropped_at_stop", token=work.token[:16])
            self.queue.clear()
            if self.running is not None:
                self.running_executor.abort()
                self.running = None
                self.counters["aborted_busy_ms"] += int((time.monotonic() - self._t0) * 1000)
        else:
            self.counters["control_unexpected"] += 1

    def _cancel(self, token: DispatchToken) -> None:
        if self.faults is not None and self.faults.on_cancel(token):
            return
        for work in list(self.queue):
            if work.token == token:
                self.queue.remove(work)
                self.counters["cancelled_queued"] += 1
                log.info("task.cancelled", token=token[:16], where="queued")
                return
        if self.running is not None and self.running.token == token:
            self.running_executor.abort()
            self.running = None
            self.counters["cancelled_running"] += 1
            self.counters["aborted_busy_ms"] += int((time.monotonic() - self._t0) * 1000)  # not in busy_s
            log.info("task.cancelled", token=token[:16], where="running")

    def _heartbeat(self) -> None:
        held = tuple(w.token for w in self.queue) + ((self.running.token,) if self.running else ())
        if self.faults is not None:
            held += tuple(self.faults.held_back)  # withheld `late` results are still ours
        self.world.send(COORDINATOR, Tag.CONTROL, encode(Control(ControlKind.HEARTBEAT, held, {
            "work_received": self.work_received, "busy_s": round(self.busy_s, 6), "rss_mb": self._rss_mb()})))

    def _rss_mb(self) -> int:
        """Resident memory of this worker and its executors' child processes (Linux /proc; else 0)."""
        pids = [os.getpid()] + [pid for ex in self.executors.values() if (pid := getattr(ex, "child_pid", None))]
        pages = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/statm") as fh:
                    pages += int(fh.read().split()[1])
            except (OSError, ValueError, IndexError):
                continue
        return pages * os.sysconf("SC_PAGE_SIZE") >> 20

    # ------------------------------------------------------------------ execution

    def _start(self, work: Work) -> None:
        self.running = work
        self._t0 = time.monotonic()
        try:
            if sha256_hex(work.data) != work.sha256:
                raise ValueError("input materialization failed: sha256 mismatch")
            if work.executor not in self.executors:
                self.executors[work.executor] = make_executor(work.executor)
            self.running_executor = self.executors[work.executor]
            self.running_executor.start(Task(work.token, work.work_id, work.data, work.target, work.bound,
                                             dict(work.options), work.attempt))
        except Exception as exc:
            self._answer(work, self._error_result(work, exc))
            self.running = None

    def _wait(self, timeout_s: float) -> Outcome | None:
        try:
            return self.running_executor.wait(timeout_s)
        except Exception as exc:
            work, self.running = self.running, None
            self._answer(work, self._error_result(work, exc))
            return None

    def _finish(self, outcome: Outcome) -> None:
        work, self.running = self.running, None
        self.busy_s += time.monotonic() - self._t0
        self._answer(work, self._result(work, outcome))

    def _result(self, work: Work, outcome: Outcome) -> Result:
        candidates = []
        for c in outcome.candidates:
            if c.kind is Status.OK:
                bits = self.coverage.merge(c.trace)
                if bits == 0:
                    self.counters["filtered_no_new_bits"] += 1
                    continue
            else:
                bits = 0
            candidates.append(Candidate(c.data, sha256_hex(c.data), pack_trace(c.trace), c.kind, c.bound, bits,
                                        c.detail))
        self.coverage.merge(outcome.trace)
        return Result(work.token, work.work_id, outcome.status, tuple(candidates),
                      Cost(outcome.wall_s, outcome.cpu_s, outcome.solver_s, outcome.execs),
                      self.coverage.version, pack_trace(outcome.trace), outcome.error,
                      {k: int(v) for k, v in outcome.stats.items()}, tuple(outcome.tokens), outcome.resume_at)

    @staticmethod
    def _error_result(work: Work, exc: BaseException) -> Result:
        text = "".join(traceback.format_exception(exc))[-8000:]
        return Result(work.token, work.work_id, Status.ERROR, error=text)

    def _answer(self, work: Work, result: Result) -> None:
        """Every exit path ends here; the sender stamps the WORK's token on the result."""
        if self.faults is None:
            self.sender.hold(work.token, result)  # sent by `_flush_held` (several may share a frame)
            return
        self.faults.before_result(work.token, result)
        if self.faults.replace_buggy(work.token, result):
            return
        if self.faults.hold_back(work.token):
            self.faults.held(work.token, self.sender.seal(work.token, result))
            return
        self.faults.after_result(self.sender.send(work.token, result))
