"""Targets for the long-lived fuzz process's tests (tests/test_fuzzproc*.py)."""

from __future__ import annotations

import os
import zlib

ENGINE_FIND = b"ENGINE-FIND-7f3a9c"  # an input libFuzzer will not make up in a few seconds
CRASHER = b"\xde\xad\xbe\xef"
PY_CRASHER = b"PY-CRASH-41c2"  # a Python exception, by checksum too
_PY_CRC = zlib.crc32(PY_CRASHER)
_FIND_CRC = zlib.crc32(ENGINE_FIND)
_CRASH_CRC = (zlib.crc32(CRASHER + b"1"), zlib.crc32(CRASHER + b"2"))  # out of libFuzzer's reach


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
