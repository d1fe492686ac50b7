"""One run of libFuzzer (Atheris) on one target: the process a fuzz slice runs in (a ``childserve`` handler).

Run as ``python -m symfence.worker.childserve symfence.worker.fuzz.slice_child ...`` by
``worker.executors.fuzz.FuzzExecutor``; the request's task names the target, its options carry
``libfuzzer_args``, ``found_dir`` and ``exec_timeout_s``. The target's module is imported inside
``atheris.instrument_imports`` (so the target and the library code it imports count for
libFuzzer's coverage feedback), then ``atheris.Fuzz`` runs until ``-max_total_time`` and exits
the process. Kept inputs land in the slice's own corpus folder (libFuzzer writes new units to the
first folder), the worker's corpus folder is read as a second one.

A Python exception or CPU time-out inside the target does not end the run: the harness catches
it, records the input once per distinct signature (``found/crash-<sha1>`` plus a ``.txt`` with the
traceback, or ``found/hang-<sha1>``) and returns, so libFuzzer keeps going. Only what Python cannot
catch (a native crash, a native hang caught by libFuzzer's ``-timeout``, running out of memory)
ends the process early; libFuzzer then writes its artifact and the parent restarts the slice.
The harness streams ``Entered`` at its first execution (the slice clock starts there, not at
start-up) and ``Counted`` (its execution count) every quarter second, and turns on
``faulthandler`` so a native crash leaves the Python stack in the log. The request never gets
a ``Done``: libFuzzer ends the process when its time is up.
"""

from __future__ import annotations

import faulthandler
import hashlib
import importlib
import os
import signal
import sys
import time
import traceback
from typing import Any

import atheris

from symfence.worker import atheris_compat
from symfence.worker.childserve import Events
from symfence.worker.childwire import RunTask
from symfence.worker.engine_api import Outcome, Phase

_MAX_FINDINGS = 64  # per run: one input per distinct signature, at most this many


class _Timeout(BaseException):
    pass


def _on_vtalrm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _signature(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else "?"
    return f"{type(exc).__name__}@{where}"


def fuzz(request: RunTask, events: Events) -> Outcome:
    spec = request.task.options
    module_name, _, attr = request.task.target.partition(":")
    atheris_compat.plain(atheris_compat.IN_FUZZ_SLICE)  # the harness's instrument_all(): done below
    # Everything the target's import brings in is instrumented, symfence and Atheris excepted.
    with atheris.instrument_imports(exclude=["symfence", "atheris"]):
        module = importlib.import_module(module_name)
    fn = getattr(module, attr)
    found = spec["found_dir"]
    exec_timeout = float(spec["exec_timeout_s"])
    signatures = os.path.join(found, "signatures.list")  # shared by the restarts of one slice
    seen: set[str] = set(open(signatures).read().splitlines()) if os.path.exists(signatures) else set()
    state = {"execs": 0, "next_write": time.monotonic() + 0.25}
    signal.signal(signal.SIGVTALRM, _on_vtalrm)
    setitimer, vtimer = signal.setitimer, signal.ITIMER_VIRTUAL

    def record(kind: str, data: bytes, key: str, detail: str) -> None:
        if key in seen or len(seen) >= _MAX_FINDINGS:
            return
        seen.add(key)
        with open(signatures, "a") as fh:
            fh.write(key.replace("\n", " ") + "\n")
        name = os.path.join(found, f"{kind}-{hashlib.sha1(data).hexdigest()}")
        with open(name + ".txt", "w") as fh:
            fh.write(detail)
        with open(name, "wb") as fh:
            fh.write(data)

    def one_input(data: bytes) -> None:
        if not state["execs"]:  # after libFuzzer's own handlers, which faulthandler then chains to
            faulthandler.enable()  # a native crash leaves the Python stack in the log
            events.entered(Phase.INPUT)  # the slice clock starts now, not at start-up
        state["execs"] += 1
        setitimer(vtimer, exec_timeout, 0.05)
        try:
            fn(data)
        except _Timeout:
            setitimer(vtimer, 0)
            with open(os.path.join(found, "hangs.list"), "a") as fh:  # kept ones are not replayed
                fh.write(hashlib.sha1(data).hexdigest() + "\n")
            record("hang", data, "hang", f"execution exceeded {exec_timeout:g} s of CPU time")
        except BaseException as exc:  # noqa: BLE001 - anything the target raises is a crash
            setitimer(vtimer, 0)
            exc.__traceback__ = exc.__traceback__.tb_next if exc.__traceback__ else None  # our frame
            record("crash", data, _signature(exc), "".join(traceback.format_exception(exc))[-8000:])
        else:
            setitimer(vtimer, 0)
        if state["execs"] & 255 == 0 and time.monotonic() >= state["next_write"]:
            state["next_write"] = time.monotonic() + 0.25
            events.counted(state["execs"])

    args = [sys.argv[0], *spec["libfuzzer_args"]]
    atheris.Setup(args, one_input)
    atheris.Fuzz()  # exits the process at -max_total_time
    raise RuntimeError("libFuzzer returned")


class SliceHandler:
    def run(self, request: RunTask, events: Events) -> Outcome:
        return fuzz(request, events)

    def close(self) -> None:
        pass


def handler(scratch_dir: str) -> SliceHandler:
    return SliceHandler()
