"""Parent side of the real tracer: one warm child process, fed a batch of inputs, polled without blocking.

``TraceClient.submit`` sends a batch; ``poll`` returns the finished list of ``Traced`` (one per
input, in order) once every input ran, else None. A child that dies or overruns an execution's
budget is killed and replaced, the input it was on is reported as a crash or hang with an empty
trace, and the rest of the batch goes on in the new child.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

from symfence.worker.realtrace.tracer import Traced

_REPO_ROOT = str(Path(__file__).resolve().parents[2])
_MPI_ENV_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDRA_", "HYDI_", "MPIR_", "PRTE_", "I_MPI_", "MPI_LOCAL")


def child_env() -> dict[str, str]:
    """The environment for a worker's helper process: no MPI launcher variables, repo on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_MPI_ENV_PREFIXES)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO_ROOT, os.getcwd(), env.get("PYTHONPATH")) if p)
    return env


class _Proc:
    def __init__(self, python: str):
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [python, "-m", "symfence.worker.realtrace.child", str(to_r), str(from_w)],
                pass_fds=(to_r, from_w), env=child_env(), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
        except BaseException:
            os.close(to_w)
            os.close(from_r)
            raise
        finally:
            os.close(to_r)
            os.close(from_w)
        self.outbox = Connection(to_w, readable=False)
        self.inbox = Connection(from_r, writable=False)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.inbox.close()
        self.outbox.close()


class TraceClient:
    """Runs batches of inputs through the tracer child; see the module docstring."""

    def __init__(self, python: str | None = None):
        self._python = python or sys.executable
        self._proc: _Proc | None = None
        self._batch: dict | None = None
        self.restarts = 0

    def submit(self, target: str, include: list[str], timeout_s: float, inputs: list[bytes]) -> None:
        self._batch = {"target": target, "include": list(include), "timeout_s": timeout_s,
                       "inputs": list(inputs), "results": [None] * len(inputs), "next": 0,
                       "current": None, "since": 0.0, "error": ""}
        self._send_rest()

    def _send_rest(self) -> None:
        b = self._batch
        assert b is not None
        if self._proc is None:
            self._proc = _Proc(self._python)
        b["offset"] = b["next"]
        b["current"], b["since"] = None, time.monotonic()
        self._proc.outbox.send(("trace", b["target"], b["include"], b["timeout_s"], list(sys.path),
                                b["inputs"][b["next"]:]))

    def _fail_current(self, status: str, detail: str) -> None:
        b = self._batch
        assert b is not None and self._proc is not None
        self._proc.kill()
        self._proc = None
        self.restarts += 1
        i = b["current"] if b["current"] is not None else b["next"]
        if i < len(b["inputs"]):
            b["results"][i] = Traced(status, {}, detail)
        b["next"] = i + 1
        if b["next"] < len(b["inputs"]):
            self._send_rest()

    def poll(self, timeout_s: float) -> list[Traced] | None:
        """Wait up to ``timeout_s`` for the batch; the results once every input is traced."""
        b = self._batch
        if b is None:
            return None
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            if b["next"] >= len(b["inputs"]) and self._proc is None:
                return self._finish()
            assert self._proc is not None
            budget = b["since"] + b["timeout_s"] * 2 + 5.0  # the child limits CPU time itself
            now = time.monotonic()
            try:
                ready = self._proc.inbox.poll(max(0.0, min(deadline, budget) - now))
                message = self._proc.inbox.recv() if ready else None
            except (EOFError, OSError):
                self._fail_current("crash", "the tracer process died while executing this input")
                continue
            if message is None:
                if time.monotonic() >= budget:
                    self._fail_current("hang", f"execution overran {b['timeout_s']:g} s (tracer killed)")
                    continue
                if time.monotonic() >= deadline:
                    return None
                continue
            kind = message[0]
            if kind == "exec":
                b["current"], b["since"] = b["offset"] + message[1], time.monotonic()
            elif kind == "traced":
                i = b["offset"] + message[1]
                b["results"][i] = message[2]
                b["next"] = i + 1
                b["current"] = None
            elif kind == "done":
                if message[1]:
                    b["error"] = message[1]
                    b["next"] = len(b["inputs"])
                if b["next"] >= len(b["inputs"]):
                    return self._finish()

    def _finish(self) -> list[Traced]:
        b, self._batch = self._batch, None
        assert b is not None
        if b["error"]:
            raise RuntimeError(f"real tracer: {b['error']}")
        return [r if r is not None else Traced("crash", {}, "not traced") for r in b["results"]]

    def abort(self) -> None:
        """Drop the batch in flight (the child is killed; a new one starts with the next batch)."""
        if self._batch is not None and self._proc is not None:
            self._proc.kill()
            self._proc = None
        self._batch = None

    def close(self) -> None:
        self._batch = None
        if self._proc is not None:
            try:
                self._proc.outbox.send(("stop",))
                self._proc.proc.wait(timeout=2.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self._proc.kill()
            self._proc = None
