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
    """Crashes two ways: a Python exception (caught inside the slice) and a native abort (ends the
    fuzzing process: the slice restarts) on inputs any mutation fuzzer reaches quickly."""
    if len(data) >= 2 and data[0] == 0xAB:
        import os

        os.abort()
    if data[:1] == b"\x01":
        raise ShallowBug("python-level")
