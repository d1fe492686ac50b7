"""Confirms a crash or hang on the plain target (no proxies, no rewrite) in a fresh interpreter.

A finding becomes a finding only if the uninstrumented target, imported normally by a new
``python`` process with the same ``sys.path``, crashes (any exception, or the process dies)
or exceeds the time limit on the same input. The child is a few lines run with ``-c`` (it
imports neither symfence nor z3); the input goes through stdin, the verdict comes back as the
exit status, the plain traceback on stderr. Its environment is ``protocol.childenv``'s, with the
engine's ``sys.path`` as ``PYTHONPATH`` (a ``-c`` child has no other way to receive it).

A hang's detail carries what makes its identity (``protocol.pycrash.identity_from_hang``): past
the deadline the child samples its stack ``HANG_SAMPLES`` times, 20 ms apart, and prints the
frames active at every sample (the same activation: a helper the loop keeps calling is left
out, the loop's frame and its callers stay) under ``HANG_STACK_MARK``. A target stuck in C code
(no Python bytecode runs, so no signal handler does) is dumped by faulthandler's watchdog one
second later; a child killed by a signal prints faulthandler's stack of it too. The timer is
disarmed before the child exits: its 100 ms re-arming interval used to fire during interpreter
shutdown on a loaded host, after the handlers were reset, so a hang came back as a crash
("target process killed by signal 14").
"""

from __future__ import annotations

import enum
import os
import subprocess
import sys
from dataclasses import dataclass

from symfence.protocol.childenv import child_env
from symfence.protocol.pycrash import HANG_STACK_MARK, compact_traceback
from symfence.worker.hangstack import HANG_SAMPLES

_DETAIL_CHARS = 8000  # of a hang's or a killed child's report

_OK, _CRASH, _HANG, _LOAD = 0, 10, 11, 12

_CHILD = r"""
import importlib, signal, sys, traceback
spec, timeout, SAMPLES = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
data = sys.stdin.buffer.read()
module_name, _, function_name = spec.partition(":")
from symfence.worker.atheris_compat import plain  # (sys.path is the parent's: PYTHONPATH)
plain()  # an Atheris harness's libFuzzer-only calls, module-level Setup and Fuzz too: no-ops
from symfence.worker.target_exit import guard
guard()  # the target's os._exit raises: its traceback and our verdict, not its exit status as one
try:
    target = getattr(importlib.import_module(module_name), function_name)
except BaseException:
    traceback.print_exc()
    sys.exit(12)
import faulthandler
faulthandler.enable()  # killed by a signal (C extension code): the Python stack on stderr
class Timeout(BaseException):
    pass
from symfence.worker.hangstack import HangSampler
sampler = HangSampler(SAMPLES, skip_file="<string>")  # the stacks sampled after the deadline
def alarm(signum, frame):
    if not sampler.sample(frame):
        raise Timeout()
signal.signal(signal.SIGALRM, alarm)
signal.setitimer(signal.ITIMER_REAL, timeout, 0.02)
faulthandler.dump_traceback_later(timeout + 1.0, exit=True)  # stuck in C code: its stack, then exit
try:
    target(data)
except Timeout:
    signal.setitimer(signal.ITIMER_REAL, 0)
    faulthandler.cancel_dump_traceback_later()
    sys.stderr.write(sampler.report())
    sys.stderr.flush()
    sys.exit(11)
except BaseException:
    signal.setitimer(signal.ITIMER_REAL, 0)
    faulthandler.cancel_dump_traceback_later()
    traceback.print_exc()
    sys.stderr.flush()
    sys.exit(10)
signal.setitimer(signal.ITIMER_REAL, 0)
faulthandler.cancel_dump_traceback_later()
sys.exit(0)
"""


class Verdict(enum.Enum):
    """What the plain target did with the input."""

    CRASHED = "crashed"
    HUNG = "hung"
    RAN_FINE = "ran_fine"
    UNKNOWN = "unknown"  # the replay itself failed (target not importable plainly, no python)


@dataclass(frozen=True)
class Replay:
    verdict: Verdict
    detail: str  # the plain traceback for a crash, else a short reason


def replay_plain(target: str, data: bytes, timeout_s: float, *, python: str | None = None) -> Replay:
    """Run ``target`` (``module:function``) on ``data`` in a fresh interpreter, without the engine."""
    env = child_env()
    paths = [p if p else os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.pop("PYTHONSTARTUP", None)
    try:
        proc = subprocess.run([python or sys.executable, "-c", _CHILD, target, repr(float(timeout_s)),
                               str(HANG_SAMPLES)],
                              input=data, capture_output=True, env=env,
                              timeout=timeout_s + 30.0, start_new_session=True)
    except subprocess.TimeoutExpired:
        return Replay(Verdict.HUNG, f"plain replay exceeded {timeout_s + 30.0:g} s")
    except OSError as exc:
        return Replay(Verdict.UNKNOWN, f"cannot start the plain replay: {exc}")
    stderr = proc.stderr.decode("utf-8", "replace")
    code = proc.returncode
    if code == _OK:
        return Replay(Verdict.RAN_FINE, "")
    if code == _HANG:
        return Replay(Verdict.HUNG, f"execution exceeded {timeout_s:g} s\n{_stack(stderr)}")
    if stderr.startswith("Timeout (") and "(most recent call first)" in stderr:  # stuck in C code
        return Replay(Verdict.HUNG, f"execution exceeded {timeout_s:g} s (faulthandler's stack at "
                                    f"{timeout_s + 1.0:g} s)\n{_stack(stderr)}")
    if code == _LOAD:
        return Replay(Verdict.UNKNOWN, "plain import failed: " + stderr[-500:])
    if code == _CRASH:
        return Replay(Verdict.CRASHED, stderr)
    how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
    return Replay(Verdict.CRASHED, f"target process {how}\n{_stack(stderr)}")


def _stack(stderr: str, limit: int = _DETAIL_CHARS) -> str:
    """The child's stack report within ``limit`` characters, by whole frames of both ends: its
    head (the hang's ``HANG_STACK_MARK``) stays. Cut by characters, a deep stack (pydot's
    pyparsing grammar) lost the mark, and every hang of it was identity ``timeout``, each one a
    bug of its own."""
    return compact_traceback(stderr, limit)[-limit:]
