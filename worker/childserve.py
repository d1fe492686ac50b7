"""The child side of every engine: one serve loop that runs the tasks its parent sends.

    python -m symfence.worker.childserve ENGINE_MODULE READ_FD WRITE_FD [SCRATCH_DIR [FATAL_FD]]

started by ``worker.childproc.ChildProcess``. ``ENGINE_MODULE`` (e.g.
``symfence.worker.concolic.runner``) provides ``handler(scratch_dir) -> Handler``; the loop says
``Ready``, then for each ``RunTask`` appends the parent's missing ``sys.path`` entries (the
user's modules resolve as in the parent; nothing of symfence's own is added), says
``Accepted``, runs the handler with an ``Events`` to stream its progress, and sends ``Done``
with the outcome. A handler that raises makes that task an ERROR, not a dead child. It
returns at ``Stop`` or when the parent goes away. SIGINT is ignored: the parent decides when
this process stops. A fatal signal (the target's C code) has faulthandler write the Python
stack to ``FATAL_FD``, a file the parent reads when the child dies (``fatal_report``).
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Protocol

from symfence.worker import childwire as wire
from symfence.worker import target_exit
from symfence.worker.engine_api import Candidate, ExitKind, Outcome, Phase


class Events:
    """What a handler reports while a task runs (each call is one ``childwire`` message)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def send(self, message: wire.FromChild) -> None:
        self._conn.send_bytes(wire.encode(message))

    def entered(self, phase: Phase, data: bytes = b"", bound: int = 0, index: int = -1) -> None:
        self.send(wire.Entered(phase, data, bound, time.monotonic(), index))

    def input_traced(self, trace: Mapping[int, int]) -> None:
        self.send(wire.InputTraced(dict(trace)))

    def found(self, candidate: Candidate) -> None:
        self.send(wire.Found(candidate))

    def subgroup(self, pgid: int) -> None:
        self.send(wire.SubGroup(pgid))

    def executed(self, index: int, kind: ExitKind, trace: Mapping[int, int], detail: str = "") -> None:
        self.send(wire.Executed(index, kind, dict(trace), detail))

    def counted(self, execs: int) -> None:
        self.send(wire.Counted(execs))


class Handler(Protocol):
    """An engine's child side: runs one request, streaming through ``events``."""

    def run(self, request: wire.RunTask, events: Events) -> Outcome: ...

    def close(self) -> None: ...


def extend_sys_path(paths: tuple[str, ...]) -> None:
    missing = [p for p in paths if p not in sys.path]
    if missing:
        sys.path.extend(missing)
        importlib.invalidate_caches()


def serve(handler: Handler, inbox: Connection, outbox: Connection) -> None:
    """Answer requests until the parent says stop or goes away."""
    events = Events(outbox)
    events.send(wire.Ready(os.getpid()))
    while True:
        try:
            message = wire.decode(inbox.recv_bytes())
        except EOFError:
            return
        if isinstance(message, wire.Stop):
            return
        if not isinstance(message, wire.RunTask):
            raise wire.ChildProtocolError(f"the parent sent {type(message).__name__}")
        extend_sys_path(message.sys_path)
        events.send(wire.Accepted())
        try:
            outcome = handler.run(message, events)
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception:  # noqa: BLE001 - an engine bug is this task's ERROR, not our death
            outcome = Outcome(ExitKind.ERROR, error=traceback.format_exc()[-4000:])
        events.send(wire.Done(outcome))


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    module, fd_in, fd_out = argv[0], int(argv[1]), int(argv[2])
    scratch = argv[3] if len(argv) > 3 else ""
    if len(argv) > 4:
        faulthandler.enable(file=os.fdopen(int(argv[4]), "w", closefd=False), all_threads=False)
    target_exit.guard()  # a target's os._exit is its crash, not this process's end
    factory: Callable[[str], Handler] = importlib.import_module(module).handler
    inbox = Connection(fd_in, writable=False)
    outbox = Connection(fd_out, readable=False)
    handler = factory(scratch)
    try:
        serve(handler, inbox, outbox)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone
    finally:
        handler.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
