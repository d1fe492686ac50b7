"""The native Executor: runs native tasks (engine + oracle) in a long-lived child process whose
whole process group the parent kills when a phase overruns its time-out.

The child (``symfence.worker.native.runner``) streams the phase it is in; the parent owns the
clock: an execution (input or candidate) gets ``exec_timeout_s`` plus a grace, an engine run
``engine_timeout_s`` plus a grace. On overrun the child's process group (and a SymCC run's own
group) is SIGKILLed and a fresh child is started; the input or candidate being executed
becomes a HANG finding, an overrunning engine run ends the task as an ERROR with the
candidates so far. A child that dies on its own while out of memory (its stderr says so) makes
an out-of-memory finding (``MemoryError: ...``, saved as ``kind:oom``); any other death is the input's CRASH (or an ERROR outside an
execution). MPI launcher variables are removed from the child's environment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from symfence.worker.executors.base import CandidateOut, ExitKind, Outcome, Task
from symfence.worker.native.base import NativeOptions
from symfence.worker.native.runner import OOM_MARK

_REPO_ROOT = str(Path(__file__).resolve().parents[2])
_MPI_ENV_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDRA_", "HYDI_", "MPIR_", "PRTE_", "I_MPI_", "MPI_LOCAL")
_OOM_SIGNS = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory", b"out of memory")


@dataclass
class _Running:
    task: Task
    options: NativeOptions
    started: float
    phase: str = "queued"
    phase_since: float = 0.0
    data: bytes = b""
    bound: int = 0
    sub_pgid: int = 0
    candidates: list[CandidateOut] = field(default_factory=list)
    execs: int = 0
    ready: Outcome | None = None


class _Child:
    def __init__(self, python: str):
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        env = {k: v for k, v in os.environ.items() if not k.startswith(_MPI_ENV_PREFIXES)}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO_ROOT, env.get("PYTHONPATH")) if p)
        self.dir = tempfile.mkdtemp(prefix="symfence-native-")
        env["SYMFENCE_NATIVE_DIR"] = self.dir
        self.stderr_path = os.path.join(self.dir, "child.stderr")
        with open(self.stderr_path, "wb") as err:
            try:
                self.proc = subprocess.Popen(
                    [python, "-m", "symfence.worker.native.runner", str(to_r), str(from_w)],
                    pass_fds=(to_r, from_w), env=env, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
            except BaseException:
                os.close(to_w)
                os.close(from_r)
                raise
            finally:
                os.close(to_r)
                os.close(from_w)
        self.outbox = Connection(to_w, readable=False)
        self.inbox = Connection(from_r, writable=False)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill_group(self, extra_pgid: int = 0) -> None:
        for pgid in (self.proc.pid, extra_pgid):
            if pgid:
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def close(self, extra_pgid: int = 0) -> None:
        self.kill_group(extra_pgid)
        self.proc.wait()
        self.inbox.close()
        self.outbox.close()
        for name in os.listdir(self.dir) if os.path.isdir(self.dir) else ():
            path = os.path.join(self.dir, name)
            if os.path.isdir(path):
                import shutil
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        try:
            os.rmdir(self.dir)
        except OSError:
            pass

    def out_of_memory(self) -> bool:
        try:
            tail = Path(self.stderr_path).read_bytes()[-4000:]
        except OSError:
            return False
        return any(sign in tail for sign in _OOM_SIGNS)


class NativeExecutor:
    """Executor for native targets; see the module docstring."""

    def __init__(self, *, python: str | None = None, start_timeout_s: float = 60.0):
        self._python = python or sys.executable
        self._start_timeout_s = start_timeout_s
        self._child: _Child | None = None
        self._running: _Running | None = None
        self._closed = False

    @property
    def child_pid(self) -> int | None:
        return self._child.proc.pid if self._child is not None else None

    def __enter__(self) -> NativeExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- Executor protocol --------------------------------------------------------------------

    def start(self, task: Task) -> None:
        if self._closed:
            raise RuntimeError("executor is closed")
        if self._running is not None:
            raise RuntimeError("a task is already running")
        try:
            options = NativeOptions.from_mapping(task.options)
        except ValueError as exc:
            self._running = _Running(task, NativeOptions(), time.monotonic(),
                                     ready=Outcome(ExitKind.ERROR, error=str(exc)))
            return
        run = _Running(task, options, time.monotonic())
        self._running = run
        message = ("task", task.target, task.data, task.bound, dict(task.options))
        for attempt in range(2):
            try:
                if self._child is None or not self._child.alive():
                    self._replace_child()
                assert self._child is not None
                self._child.outbox.send(message)
                return
            except (BrokenPipeError, ConnectionResetError):
                self._replace_child()
            except Exception as exc:  # noqa: BLE001
                run.ready = Outcome(ExitKind.ERROR, error=f"cannot hand the task over: {exc!r}")
                return
        run.ready = Outcome(ExitKind.ERROR, error="native child process keeps dying at start")

    def wait(self, timeout_s: float) -> Outcome | None:
        run = self._running
        if run is None:
            return None
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            outcome = run.ready or self._drain(run) or self._enforce(run)
            if outcome is not None:
                self._running = None
                return outcome
            now = time.monotonic()
            if now >= deadline:
                return None
            assert self._child is not None
            self._child.inbox.poll(min(deadline - now, max(0.0, self._deadline(run) - now) + 0.001))

    def abort(self) -> None:
        if self._running is None:
            return
        sub = self._running.sub_pgid
        self._running = None
        self._replace_child(sub)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        child, self._child = self._child, None
        if child is None:
            return
        if self._running is None and child.alive():
            try:
                child.outbox.send(("stop",))
                child.proc.wait(timeout=2.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        child.close(self._running.sub_pgid if self._running else 0)
        self._running = None

    # -- progress stream ----------------------------------------------------------------------

    def _drain(self, run: _Running) -> Outcome | None:
        child = self._child
        if child is None:
            return Outcome(ExitKind.ERROR, error="native child process could not be started")
        while True:
            try:
                if not child.inbox.poll(0):
                    return None
                message = child.inbox.recv()
            except (EOFError, OSError):
                return self._died(run)
            except Exception as exc:  # noqa: BLE001
                self._replace_child(run.sub_pgid)
                return Outcome(ExitKind.ERROR, error=f"native child sent an unreadable message ({exc!r})")
            kind = message[0]
            if kind == "accepted":
                run.phase, run.phase_since = "loading", time.monotonic()
            elif kind == "phase":
                _, run.phase, run.data, run.bound = message
                run.phase_since = time.monotonic()
                run.execs += 1
            elif kind == "pgid":
                run.sub_pgid = message[1]
            elif kind == "candidate":
                run.candidates.append(message[1])
            elif kind == "done":
                return message[1]

    def _deadline(self, run: _Running) -> float:
        opts = run.options
        if run.phase == "queued":
            return run.started + self._start_timeout_s
        if run.phase == "loading":
            return run.phase_since + self._start_timeout_s
        if run.phase == "engine":
            return run.phase_since + opts.engine_timeout_s + max(2.0, 0.2 * opts.engine_timeout_s)
        return run.phase_since + opts.exec_timeout_s + max(1.0, opts.exec_timeout_s)

    def _enforce(self, run: _Running) -> Outcome | None:
        if time.monotonic() < self._deadline(run):
            return None
        phase = run.phase
        self._replace_child(run.sub_pgid)
        wall = time.monotonic() - run.started
        stats = {"child_restarts": 1, "killed_by_parent": 1}
        if phase == "input":
            return Outcome(ExitKind.HANG, wall_s=wall, execs=run.execs, stats=stats,
                           error=f"execution overran {run.options.exec_timeout_s:g} s (killed by the worker)")
        if phase == "candidate":
            lost = CandidateOut(run.data, {}, ExitKind.HANG, run.bound,
                                f"execution overran {run.options.exec_timeout_s:g} s (killed by the worker)")
            return Outcome(ExitKind.OK, candidates=(*run.candidates, lost), wall_s=wall, execs=run.execs,
                           stats=stats)
        return Outcome(ExitKind.ERROR, candidates=tuple(run.candidates), wall_s=wall, execs=run.execs,
                       stats=stats, error=f"native {phase} phase overran its time-out; process group killed")

    def _died(self, run: _Running) -> Outcome:
        child = self._child
        assert child is not None
        try:
            code = child.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        oom = child.out_of_memory()
        how = "exited" if code is None or code >= 0 else f"killed by signal {-code}"
        self._replace_child(run.sub_pgid)
        wall = time.monotonic() - run.started
        stats = {"child_restarts": 1, "engine_oom": int(oom)}
        if oom:
            detail = (f"{OOM_MARK}: the native engine child exceeded mem_limit_mb="
                      f"{run.options.mem_limit_mb} ({run.phase} phase, {how})")
            if run.phase == "candidate":
                lost = CandidateOut(run.data, {}, ExitKind.CRASH, run.bound, detail)
                return Outcome(ExitKind.OK, candidates=(*run.candidates, lost), wall_s=wall,
                               execs=run.execs, stats=stats)
            return Outcome(ExitKind.CRASH, candidates=tuple(run.candidates), wall_s=wall,
                           execs=run.execs, stats=stats, error=detail)
        return Outcome(ExitKind.ERROR, candidates=tuple(run.candidates), wall_s=wall, execs=run.execs,
                       stats=stats, error=f"native child process {how} in its {run.phase} phase")

    def _replace_child(self, sub_pgid: int = 0) -> None:
        if self._child is not None:
            self._child.close(sub_pgid)
            self._child = None
        try:
            self._child = _Child(self._python)
        except OSError:
            self._child = None
