"""Harness: ``plistlib.loads`` on the raw input, binary or XML (instrument ``plistlib``)."""

import plistlib


def target(data: bytes) -> None:
    try:
        plistlib.loads(data)
    except (plistlib.InvalidFileException, ValueError, EOFError, OverflowError):
        pass
