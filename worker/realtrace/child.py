"""Child-process side of the real tracer: imports targets plainly and traces the inputs it is sent.

Started as ``python -m symfence.worker.realtrace.child FD_IN FD_OUT`` by
``worker.realtrace.client.TraceClient``. Pickled tuples over ``multiprocessing.connection``
framing between our own two local processes (the MPI wire never carries pickle):

parent -> child: ``("trace", target, include, timeout_s, sys_path, inputs)``, ``("stop",)``
child -> parent: ``("ready", pid)``; per request ``("exec", i)`` before input ``i`` runs,
``("traced", i, Traced)`` after it, then ``("done", "")`` or ``("done", error text)`` if the
target cannot be loaded. ``exec`` lets the parent name the input if this process dies or hangs.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any, Callable

from symfence.worker.realtrace.tracer import ArcTracer, TargetLoadError, load_callable, resolve_include


def serve(inbox: Connection, outbox: Connection) -> None:
    tracers: dict[tuple[str, tuple[str, ...]], tuple[ArcTracer, Callable[[bytes], Any]]] = {}
    outbox.send(("ready", os.getpid()))
    while True:
        try:
            message = inbox.recv()
        except EOFError:
            return
        if message[0] == "stop":
            return
        _, target, include, timeout_s, sys_path, inputs = message
        missing = [p for p in sys_path if p not in sys.path]
        if missing:
            sys.path.extend(missing)
            importlib.invalidate_caches()
        key = (target, tuple(include))
        if key not in tracers:
            try:
                module, fn = load_callable(target)
                tracers[key] = (ArcTracer(resolve_include(list(include), module)), fn)
            except TargetLoadError as exc:
                outbox.send(("done", str(exc)))
                continue
        tracer, fn = tracers[key]
        for i, data in enumerate(inputs):
            outbox.send(("exec", i))
            outbox.send(("traced", i, tracer.run(fn, data, timeout_s)))
        outbox.send(("done", ""))


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    inbox = Connection(int(argv[0]), writable=False)
    outbox = Connection(int(argv[1]), readable=False)
    devnull = os.open(os.devnull, os.O_WRONLY)  # a chatty target must not fill a pipe
    os.dup2(devnull, 1)
    try:
        serve(inbox, outbox)
    except (BrokenPipeError, ConnectionResetError):
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
