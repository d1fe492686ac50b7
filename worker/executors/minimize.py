"""The minimization Executor: runs one minimization task (worker/triage/minimize_child.py) in a
child process of its own session, killed on abort or when it overruns its budget."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from symfence.protocol.childenv import child_env

from symfence.worker.engine_api import CandidateOut, ExitKind, Outcome, Task

PREFIX = "minimize_"  # the task's own options (coordinator/triage.py OPTION_PREFIX)
_GRACE_S = 15.0  # start-up (the target's import) and the last runs after the budget


@dataclass
class _Run:
    task: Task
    proc: subprocess.Popen | None
    folder: str
    started: float
    budget_s: float
    kind: str
    ready: Outcome | None = None


class MinimizeExecutor:
    """Executor for minimization tasks; see the module docstring."""

    def __init__(self, *, python: str | None = None) -> None:
        self._python = python or sys.executable
        self._run: _Run | None = None

    @property
    def child_pid(self) -> int | None:
        run = self._run
        return run.proc.pid if run is not None and run.proc is not None and run.proc.poll() is None else None

    def start(self, task: Task) -> None:
        if self._run is not None:
            raise RuntimeError("a task is already running")
        opts = dict(task.options)
        own = {k[len(PREFIX):]: opts.pop(k) for k in list(opts) if k.startswith(PREFIX)}
        kind = str(own.get("kind", "crash"))
        budget_s = float(own.get("budget_s", 60.0))
        folder = tempfile.mkdtemp(prefix="symfence-minimize-")
        spec = {"target": task.target, "kind": kind, "identity": str(own.get("identity", "")),
                "executor": str(own.get("executor", "")), "options": opts, "data": task.data.hex(),
                "budget_s": budget_s, "result": os.path.join(folder, "result.json"),
                "sys_path": list(sys.path)}
        path = os.path.join(folder, "spec.json")
        with open(path, "w") as fh:
            json.dump(spec, fh)
        run = _Run(task, None, folder, time.monotonic(), budget_s, kind)
        try:
            with open(os.path.join(folder, "stderr"), "wb") as err:
                argv = [self._python, "-m", "symfence.worker.triage.minimize_child", path]
                run.proc = subprocess.Popen(argv, env=child_env(), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        except OSError as exc:
            run.ready = Outcome(ExitKind.ERROR, error=f"cannot start the minimizer: {exc}")
        self._run = run

    def wait(self, timeout_s: float) -> Outcome | None:
        run = self._run
        if run is None:
            time.sleep(timeout_s)
            return None
        if run.ready is None:
            assert run.proc is not None
            try:
                run.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                if time.monotonic() - run.started < run.budget_s + _GRACE_S:
                    return None
                self._kill(run)
                run.ready = Outcome(ExitKind.ERROR, error=f"minimizer overran {run.budget_s:g} s")
            else:
                run.ready = self._outcome(run)
        outcome = run.ready
        self._cleanup(run)
        self._run = None
        return outcome

    def _outcome(self, run: _Run) -> Outcome:
        wall = time.monotonic() - run.started
        try:
            with open(os.path.join(run.folder, "result.json")) as fh:
                result = json.load(fh)
        except (OSError, ValueError):
            why = f"the minimizer died (exit {run.proc.returncode})"
            return Outcome(ExitKind.ERROR, wall_s=wall, error=why)
        if "error" in result:
            return Outcome(ExitKind.ERROR, wall_s=wall, error=str(result["error"]))
        status = ExitKind.HANG if run.kind == "hang" else ExitKind.CRASH
        data = bytes.fromhex(result["data"])
        cand = CandidateOut(data, {}, status, 0, str(result.get("detail", "")))
        stats = {"minimized_from": len(run.task.data), "minimized_to": len(data),
                 "afl_tmin": int(bool(result.get("afl_tmin"))),
                 "identity_mismatch": int(bool(result.get("mismatch")))}
        return Outcome(status, candidates=(cand,), wall_s=wall, execs=int(result.get("execs", 1)),
                       error=str(result.get("detail", "")), stats=stats)

    @staticmethod
    def _kill(run: _Run) -> None:
        if run.proc is not None and run.proc.poll() is None:
            try:
                os.killpg(run.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            run.proc.wait()

    @staticmethod
    def _cleanup(run: _Run) -> None:
        shutil.rmtree(run.folder, ignore_errors=True)

    def abort(self) -> None:
        run = self._run
        if run is not None:
            self._kill(run)
            self._cleanup(run)
            self._run = None

    def close(self) -> None:
        self.abort()


def executor() -> MinimizeExecutor:
    return MinimizeExecutor()
