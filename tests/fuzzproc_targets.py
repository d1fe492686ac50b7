"""Targets for the long-lived fuzz process's tests (tests/test_fuzzproc*.py).

Only the checksums of the planted inputs are here (tests/fuzzproc_inputs.py holds the inputs):
the fuzz process reads this module's constants into libFuzzer's dictionary (worker/fuzz/libdict.py).
"""

from __future__ import annotations

import os
import time
import zlib

_FIND_CRC = 0xD118360A  # crc32 of fuzzproc_inputs.ENGINE_FIND (test_fuzzproc checks all three)
_PY_CRC = 0x32BADDB5  # ... of PY_CRASHER
_CRASH_CRC = (0x081ECBFE, 0x91179A44)  # ... of CRASHER + b"1" and CRASHER + b"2"


def marker(data: bytes) -> None:
    """Appends this process's pid to $SYMFENCE_TEST_MARKER when it runs ENGINE_FIND; a native
    abort on CRASHER + b"1" or b"2". Both by checksum: no comparison hands libFuzzer the bytes.
    A little branching otherwise, so libFuzzer keeps some inputs."""
    if zlib.crc32(data) == _FIND_CRC:
        with open(os.environ["SYMFENCE_TEST_MARKER"], "a") as fh:
            fh.write(f"{os.getpid()}\n")
    if zlib.crc32(data) in _CRASH_CRC:
        os.abort()
    if zlib.crc32(data) == _PY_CRC:
        raise ValueError("planted behind a checksum")
    if data[:1] == b"a" and data[1:2] == b"b" and data[2:3] == b"c":
        return


def noisy_exits(data: bytes) -> None:
    """Talks at every input, as libraries do: a `logging` warning (Python's last-resort handler:
    stderr), a print to stdout and a write to fd 2 below Python, as a C library's message. Ends
    its process (os._exit) on an input starting with X; a Python bug behind b"BUG"."""
    import logging
    import sys

    logging.getLogger("fuzzproc.noisy").warning("cannot parse %r", data[:32])
    print("parsing", len(data), "bytes")
    sys.stdout.flush()
    os.write(2, b"libnoisy: error: unexpected byte at offset 0 of the input\n")
    if data[:1] == b"X":
        os._exit(3)
    if data[:3] == b"BUG":
        raise RuntimeError("planted")


def c_exit(data: bytes) -> None:
    """Ends its process below Python (C's _exit, as native code may) on the input b"Xabc" alone (by
    checksum: mutation rarely makes it again); a Python bug behind b"BUG"."""
    import ctypes

    if zlib.crc32(data) == 0xE5986081:  # crc32(b"Xabc")
        ctypes.CDLL(None)._exit(5)
    if data[:3] == b"BUG":
        raise RuntimeError("planted")


def hangs(data: bytes) -> None:
    """Loops on an input starting with b"H" until the fuzz process's CPU timer interrupts it, and
    appends the CPU seconds that execution ran to the file named by $FUZZPROC_HANG_LOG."""
    if data[:1] != b"H":
        return
    start = time.process_time()
    try:
        while True:
            pass
    finally:
        with open(os.environ["FUZZPROC_HANG_LOG"], "a") as fh:
            fh.write(f"{time.process_time() - start:.4f}\n")


def allocates(data: bytes) -> None:
    """Fills 400 MB on an input starting with b"M" (past a 300 MB -rss_limit_mb)."""
    if data[:1] == b"M":
        blob = bytearray(400 << 20)
        blob[::4096] = b"x" * len(range(0, 400 << 20, 4096))


def _spin_a() -> None:
    while True:
        pass


def _spin_b() -> None:
    while True:
        pass


def two_loops(data: bytes) -> None:
    """Two different hangs: a loop in one function behind b"H", another behind b"K"."""
    if data[:1] == b"H":
        _spin_a()
    if data[:1] == b"K":
        _spin_b()


def slow_first_use(data: bytes) -> None:
    """Imports a module on its first call whose import burns 0.6 s of CPU (docutils' first parse,
    with its lazily imported parts instrumented, took 1.02 s; the next 0.006 s); a loop behind
    b"H", so a real hang is still one."""
    from tests import fuzzproc_slow_import  # noqa: F401 - imported for its cost
    if data[:1] == b"H":
        _spin_a()
