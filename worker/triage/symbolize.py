"""A native crash's frames: the sanitizer report of an ASan/UBSan build, else a gdb batch run.

``native_detail(binary, data)`` re-runs the crashing input once on the plain build (or the
sanitizer build, when the target is one) and returns text ``protocol.crashid.identity_from_detail``
reads: the sanitizer's report, or ``BACKTRACE_MARK`` followed by gdb's signal line, ``bt`` and
``info symbol $pc`` (the faulting function and offset, from the binary's own symbols). Returns ""
when neither gives anything (no gdb, a stripped binary, the input no longer crashes).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile

from symfence.protocol.execpath import runnable
from symfence.protocol.crashid import BACKTRACE_MARK, GDB_MAPPING, is_sanitizer_report

_SANITIZER_SYMBOLS = (b"__asan_init", b"__ubsan_handle_", b"__msan_init")
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:symbolize=1:handle_segv=1",
                 "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1", "MSAN_OPTIONS": "symbolize=1"}
_KEEP_GDB = ("Program received signal", "Program terminated with signal", "#", " in section ")


@functools.lru_cache(maxsize=64)
def is_sanitized(binary: str) -> bool:
    """Whether the binary was built with a sanitizer (its runtime's symbols are in it)."""
    try:
        with open(binary, "rb") as fh:
            blob = fh.read()
    except OSError:
        return False
    return any(s in blob for s in _SANITIZER_SYMBOLS)


def _argv(binary: str, path: str, input_mode: str) -> list[str]:
    return [runnable(binary), path] if input_mode == "file" else [runnable(binary)]


def run_once(binary: str, data: bytes, input_mode: str = "stdin", timeout_s: float = 5.0) -> tuple[int, str]:
    """(exit status, stderr) of one plain run (negative status: killed by that signal; 999: timed out)."""
    with tempfile.NamedTemporaryFile(prefix="symfence-input-") as fh:
        fh.write(data)
        fh.flush()
        env = {**os.environ, **SANITIZER_ENV}
        try:
            stdin = data if input_mode != "file" else b""
            proc = subprocess.run(_argv(binary, fh.name, input_mode), input=stdin,
                                  capture_output=True, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired:
            return 999, ""
        except OSError as exc:
            return 998, str(exc)
    return proc.returncode, proc.stderr.decode(errors="replace")


def gdb_backtrace(binary: str, data: bytes, input_mode: str = "stdin", timeout_s: float = 20.0) -> str:
    """gdb's account of the crash (signal, bt, info symbol $pc), or "" without gdb or a crash."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return ""
    with tempfile.NamedTemporaryFile(prefix="symfence-input-") as fh:
        fh.write(data)
        fh.flush()
        run = f"run {fh.name}" if input_mode == "file" else f"run < {fh.name}"
        cmd = [gdb, "-batch", "-nx", "-q", "-iex", "set debuginfod enabled off", "-ex", "set pagination off",
               "-ex", run, "-ex", "bt 16", "-ex", "info symbol $pc", "-ex", "info proc mappings",
               "--args", runnable(binary)]
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s)
        except (subprocess.TimeoutExpired, OSError):
            return ""
    out = proc.stdout.decode(errors="replace")
    if "Program received signal" not in out and "Program terminated with signal" not in out:
        return ""
    own = runnable(binary)  # the binary's own mappings: a stripped binary's frames as offsets in it
    return "\n".join(l for l in out.splitlines() if l.startswith(_KEEP_GDB) or " in section " in l
                     or (GDB_MAPPING.match(l) is not None and l.rstrip().endswith(own)))


def native_detail(binary: str, data: bytes, input_mode: str = "stdin", timeout_s: float = 5.0) -> str:
    """The frames of a native crash as text for `identity_from_detail` ("" when none can be had)."""
    if is_sanitized(binary):
        _, err = run_once(binary, data, input_mode, timeout_s)
        if is_sanitizer_report(err):
            start = max(err.find("=="), 0)
            return err[start:start + 6000]
    bt = gdb_backtrace(binary, data, input_mode, timeout_s=max(20.0, timeout_s))
    return f"{BACKTRACE_MARK}\n{bt}" if bt else ""
