"""Targets for the hybrid-stage tests: a real stdlib parser behind a harness, and a small bug."""

from __future__ import annotations

import plistlib
import xml.parsers.expat

EXPECTED = (plistlib.InvalidFileException, ValueError, EOFError, KeyError, TypeError, OverflowError,
            IndexError, AttributeError, UnicodeDecodeError, RecursionError,
            xml.parsers.expat.ExpatError)


def plist(data: bytes) -> None:
    """plistlib.loads on any bytes; exceptions plistlib documents (or commonly raises) are fine."""
    try:
        plistlib.loads(data)
    except EXPECTED:
        pass


class KeywordBug(Exception):
    pass


def keyword(data: bytes) -> None:
    """A shallow bug a mutation fuzzer finds from its dictionary or by comparison feedback."""
    if len(data) >= 4 and data[:2] == b"FZ" and data[2] == 0x7F and data[3] == ord("!"):
        raise KeywordBug("reached")


class ShallowBug(Exception):
    pass


def shallow(data: bytes) -> None:
    """A bug any mutation fuzzer hits at once (one byte in 128), behind a few real branches."""
    if not data:
        return
    if data[0] >= 0x80:
        if len(data) > 1 and data[1] == 0:
            return
        raise ShallowBug(f"high byte {data[0]:#x}")


def native_and_python(data: bytes) -> None:
    """Crashes two ways and hangs two ways: a Python exception and a CPU-bound loop (both caught
    inside the slice), a native abort and a sleep (both end the fuzzing process: the slice
    restarts)."""
    if len(data) >= 2 and data[0] == 0xAB:
        import os

        os.abort()
    if data[:1] == b"\x01":
        raise ShallowBug("python-level")
    if data[:2] == b"\x02\x02":
        while True:  # a Python-level hang: the slice's CPU timer interrupts it
            pass
    if data[:2] == b"\x03\x03":
        import time

        time.sleep(60)  # a hang that burns no CPU: libFuzzer's -timeout ends the process
