"""Runs the plain build of a native target once on one input, in a fresh process: crashed, hung or ran fine.

What a user would run by hand (``./target < crash``), with the campaign's contract: the input on
stdin or in a file named by ``@@`` (``native.options.input``), the execution time limit, the
target's address-space limit, and the sanitizer settings the forkserver oracle uses (an ASan or
UBSan report ends in SIGABRT; symbolised here, so the report names functions). A crash is death
by a signal; its detail is the target's stderr (the sanitizer report) followed by one line
``SIGNAME: NAME killed by SIGNAME``, the shape every native finding's detail ends with.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import tempfile
from pathlib import Path

from symfence.worker.concolic.replay import Replay, Verdict
from symfence.protocol.childenv import child_env
from symfence.protocol.execpath import runnable
from symfence.worker.native.base import signal_name

SANITIZER_ENV = {"ASAN_OPTIONS": "abort_on_error=1:symbolize=1:detect_leaks=0",
                 "UBSAN_OPTIONS": "halt_on_error=1:abort_on_error=1:print_stacktrace=1"}
_STDERR_KEEP = 8000


def run_plain(binary: str, data: bytes, *, input_mode: str = "stdin", timeout_s: float = 1.0,
              mem_limit_mb: int = 0, args: tuple[str, ...] = ()) -> Replay:
    """Run ``binary`` on ``data`` once; see the module docstring."""
    if not Path(binary).is_file():
        return Replay(Verdict.UNKNOWN, f"{binary} does not exist")
    env = {**child_env(), **{k: v for k, v in SANITIZER_ENV.items() if k not in os.environ}}
    env = {k: v for k, v in env.items() if not k.startswith(("__AFL", "AFL_"))}

    def limits() -> None:
        if mem_limit_mb:
            size = mem_limit_mb << 20
            resource.setrlimit(resource.RLIMIT_AS, (size, size))

    with tempfile.TemporaryDirectory(prefix="symfence-plain-") as tmp:
        argv = [runnable(binary), *args]
        stdin: int | None = subprocess.PIPE
        if input_mode == "file":
            path = os.path.join(tmp, "input")
            Path(path).write_bytes(data)
            argv = [path if a == "@@" else a for a in argv] if "@@" in argv else [*argv, path]
            stdin = subprocess.DEVNULL
        proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=env, cwd=tmp, start_new_session=True, preexec_fn=limits)
        try:
            _, err = proc.communicate(data if stdin is subprocess.PIPE else None, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Replay(Verdict.HUNG, f"execution exceeded {timeout_s:g} s")
    code = proc.returncode
    if code >= 0:
        return Replay(Verdict.RAN_FINE, "")
    name = signal_name(-code)
    text = err.decode("utf-8", "replace")[-_STDERR_KEEP:]
    return Replay(Verdict.CRASHED, f"{text}{'' if not text or text.endswith(chr(10)) else chr(10)}"
                                   f"{name}: {Path(binary).name} killed by {name}")
