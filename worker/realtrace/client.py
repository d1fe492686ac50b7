"""Parent side of the real tracer: one warm child process, fed a batch of inputs, polled without blocking.

``TraceClient.submit`` sends a batch; ``poll`` returns the finished list of ``Traced`` (one per
input, in order) once every input ran, else None. A child that dies or overruns an execution's
budget is killed (its process group) and replaced, the input it was on is reported as a crash
or hang with an empty trace, and the rest of the batch goes on in the new child. The child is
a ``worker.childproc.ChildProcess`` running ``worker.realtrace.child``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from symfence.worker import childwire as wire
from symfence.worker.childproc import ChildProcess
from symfence.worker.engine_api import ExitKind, Task
from symfence.worker.memory_limit import DEFAULT_MB
from symfence.worker.realtrace.tracer import Traced

_ENGINE = "symfence.worker.realtrace.child"


@dataclass
class _Batch:
    target: str
    include: list[str]
    timeout_s: float
    inputs: list[bytes]
    memory_limit_mb: int
    results: list[Traced | None] = field(default_factory=list)
    next: int = 0  # the first input not yet finished
    offset: int = 0  # the index in ``inputs`` of the current request's first input
    current: int | None = None  # the input the child is executing
    since: float = 0.0
    error: str = ""


class TraceClient:
    """Runs batches of inputs through the tracer child; see the module docstring."""

    def __init__(self, python: str | None = None):
        self._python = python or sys.executable
        self._proc: ChildProcess | None = None
        self._batch: _Batch | None = None
        self.restarts = 0

    def submit(self, target: str, include: list[str], timeout_s: float, inputs: list[bytes], *,
               memory_limit_mb: int = DEFAULT_MB) -> None:
        self._batch = _Batch(target, list(include), timeout_s, list(inputs), memory_limit_mb, [None] * len(inputs))
        self._send_rest()

    def _send_rest(self) -> None:
        b = self._batch
        assert b is not None
        if self._proc is None:
            self._proc = ChildProcess(_ENGINE, python=self._python)
        b.offset, b.current, b.since = b.next, None, time.monotonic()
        task = Task("", "", b"", b.target, 0, {"include": b.include, "timeout_s": b.timeout_s,
                                               "memory_limit_mb": b.memory_limit_mb})
        self._proc.send(wire.RunTask(task, tuple(sys.path), tuple(b.inputs[b.next:])))

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.close()
            self._proc = None

    def _fail_current(self, status: str, detail: str) -> None:
        b = self._batch
        assert b is not None
        self._kill()
        self.restarts += 1
        i = b.current if b.current is not None else b.next
        if i < len(b.inputs):
            b.results[i] = Traced(status, {}, detail)
        b.next = i + 1
        if b.next < len(b.inputs):
            self._send_rest()

    def poll(self, timeout_s: float) -> list[Traced] | None:
        """Wait up to ``timeout_s`` for the batch; the results once every input is traced."""
        b = self._batch
        if b is None:
            return None
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            if b.next >= len(b.inputs) and self._proc is None:
                return self._finish()
            assert self._proc is not None
            budget = b.since + b.timeout_s * 2 + 5.0  # the child limits CPU time itself
            try:
                ready = self._proc.poll(min(deadline, budget) - time.monotonic())
                message = self._proc.recv() if ready else None
            except (EOFError, OSError):
                self._fail_current("crash", "the tracer process died while executing this input")
                continue
            except wire.ChildProtocolError as exc:
                self._kill()
                b.error, b.next = f"the tracer process sent a malformed message: {exc}", len(b.inputs)
                return self._finish()
            if message is None:
                if time.monotonic() >= budget:
                    self._fail_current("hang", f"execution overran {b.timeout_s:g} s (tracer killed)")
                    continue
                if time.monotonic() >= deadline:
                    return None
                continue
            if isinstance(message, wire.Entered):
                b.current, b.since = b.offset + message.index, time.monotonic()
            elif isinstance(message, wire.Executed):
                i = b.offset + message.index
                if not b.offset <= i < len(b.inputs):
                    self._kill()
                    b.error, b.next = f"the tracer process named input {i} of {len(b.inputs)}", len(b.inputs)
                    return self._finish()
                b.results[i] = Traced(message.kind.value, dict(message.trace), message.detail)
                b.next, b.current = i + 1, None
            elif isinstance(message, wire.Done):
                if message.outcome.status is ExitKind.ERROR:
                    b.error, b.next = message.outcome.error, len(b.inputs)
                if b.next >= len(b.inputs):
                    return self._finish()

    def _finish(self) -> list[Traced]:
        b, self._batch = self._batch, None
        assert b is not None
        if b.error:
            raise RuntimeError(f"real tracer: {b.error}")
        return [r if r is not None else Traced("crash", {}, "not traced") for r in b.results]

    def abort(self) -> None:
        """Drop the batch in flight (the child is killed; a new one starts with the next batch)."""
        if self._batch is not None:
            self._kill()
        self._batch = None

    def close(self) -> None:
        self._batch = None
        if self._proc is not None:
            self._proc.stop()
            self._proc = None
