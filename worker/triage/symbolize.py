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
from symfence.protocol.nativecrash import BACKTRACE_MARK, GDB_MAPPING, is_sanitizer_report

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


def unlimited_address_space() -> None:
    """In a re-run's child: the address-space limit lifted as far as it may be (soft up to hard).

    A re-run is for the crash's frames, not for the memory limit the worker may run under: a
    sanitizer build reserves terabytes of shadow memory at start and aborts under any RLIMIT_AS
    (AFL++'s `-m none` for ASan), so an inherited limit turned every ASan re-run into a SIGABRT
    at start-up with no frames."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


def run_once(binary: str, data: bytes, input_mode: str = "stdin", timeout_s: float = 5.0) -> tuple[int, str]:
    """(exit status, stderr) of one plain run (negative status: killed by that signal; 999: timed out)."""
    with tempfile.NamedTemporaryFile(prefix="symfence-input-") as fh:
        fh.write(data)
        fh.flush()
        env = {**os.environ, **SANITIZER_ENV}
        try:
            stdin = data if input_mode != "file" else b""
            proc = subprocess.run(_argv(binary, fh.name, input_mode), input=stdin,
                                  capture_output=True, timeout=timeout_s, env=env,
                                  preexec_fn=unlimited_address_space)
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
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s,
                                  preexec_fn=unlimited_address_space)
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


# gdb's Python: run the target, interrupt it at the deadline, then sample its stack HANG_SAMPLES
# times (continuing it in between), and print the frames every sample has (from the outermost in,
# by name) in `bt`'s form. A timer thread interrupts the inferior (gdb's child) with SIGINT.
_HANG_SCRIPT = r'''
import os, signal, threading, time
import gdb

def _children():
    pids = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as fh:
                pids += [int(p) for p in fh.read().split()]
        except OSError:
            pass
    return pids

def _interrupt(delay, started=False):
    def go():
        if not started:  # the deadline counts from the target's own start (gdb's start is slow)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 30 and not any(_is_target(p) for p in _children()):
                time.sleep(0.005)
        time.sleep(delay)
        for pid in _children():
            try:
                os.kill(pid, signal.SIGINT)
            except OSError:
                pass
    threading.Thread(target=go, daemon=True).start()

def _is_target(pid):
    try:
        return os.path.realpath(f"/proc/{pid}/exe") == TARGET
    except OSError:
        return False

def _stack():
    names, frame = [], gdb.newest_frame()
    while frame is not None:
        names.append((frame.name() or "??", int(frame.pc())))
        frame = frame.older()
    return names

def _in_target(stack):
    """Whether the program runs its own code (not still in the dynamic loader, which gdb's
    symbol loading can stretch past the deadline): a frame in the target's own mappings."""
    ranges = []
    try:
        with open(f"/proc/{gdb.selected_inferior().pid}/maps") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 6 and parts[5] == TARGET:
                    lo, hi = parts[0].split("-")
                    ranges.append((int(lo, 16), int(hi, 16)))
    except OSError:
        return False
    return any(lo <= pc < hi for _, pc in stack for lo, hi in ranges)

samples = []
_interrupt(DEADLINE)
gdb.execute(RUN, to_string=True)
tries = 0
while len(samples) < SAMPLES and gdb.selected_inferior().pid and tries < 100:
    tries += 1
    stack = _stack()
    if _in_target(stack):
        samples.append(stack[::-1])
    if len(samples) < SAMPLES:
        _interrupt(GAP, started=True)
        gdb.execute("continue", to_string=True)
if len(samples) == SAMPLES:
    common = []
    for level in zip(*samples):
        if any(name != level[0][0] for name, _ in level):
            break
        common.append(level[0])
    print("Program stopped at the deadline (SIGINT): frames in every sample")
    for k, (name, pc) in enumerate(reversed(common)):
        print(f"#{k}  0x{pc:016x} in {name} ()")
gdb.execute("kill")
'''
HANG_SAMPLES = 5
HANG_SAMPLE_GAP_S = 0.05


def gdb_hang_stack(binary: str, data: bytes, input_mode: str = "stdin", deadline_s: float = 1.0) -> str:
    """A hang's stack from gdb: the frames (by name, from the outermost in) in all of
    HANG_SAMPLES samples taken HANG_SAMPLE_GAP_S apart once the run passed ``deadline_s``; ""
    without gdb or when the run ends before (``pycrash.identity_from_hang`` reads it)."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return ""
    with tempfile.TemporaryDirectory(prefix="symfence-hang-") as tmp:
        path, script = os.path.join(tmp, "input"), os.path.join(tmp, "hang.py")
        with open(path, "wb") as fh:
            fh.write(data)
        run = f"run {path}" if input_mode == "file" else f"run < {path}"
        with open(script, "w") as fh:
            target = os.path.realpath(runnable(binary))
            fh.write(f"DEADLINE, GAP, SAMPLES, RUN, TARGET = {deadline_s!r}, {HANG_SAMPLE_GAP_S!r}, "
                     f"{HANG_SAMPLES}, {run!r}, {target!r}\n")
            fh.write(_HANG_SCRIPT)
        cmd = [gdb, "-batch", "-nx", "-q", "-iex", "set debuginfod enabled off", "-ex", "set pagination off",
               "-x", script, "--args", runnable(binary)]
        budget = deadline_s + 30.0
        cpu = int(budget) + 2

        def cpu_limit() -> None:  # inherited by the target: gdb runs it in a process group of its
            import resource  # own, so if gdb is killed first, the looping target still ends

            unlimited_address_space()
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))

        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=budget,
                                  preexec_fn=cpu_limit)
        except (subprocess.TimeoutExpired, OSError):
            return ""
    out = proc.stdout.decode(errors="replace")
    if "Program stopped at the deadline" not in out:
        return ""
    return "\n".join(l for l in out.splitlines() if l.startswith(("#", "Program stopped")))


def native_hang_detail(binary: str, data: bytes, input_mode: str = "stdin", deadline_s: float = 1.0) -> str:
    """A native hang's stack as text for ``identity_from_hang`` ("" when none can be had)."""
    stack = gdb_hang_stack(binary, data, input_mode, deadline_s)
    return f"{BACKTRACE_MARK}\n{stack}" if stack else ""
