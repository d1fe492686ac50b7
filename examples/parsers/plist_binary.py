"""Harness: ``plistlib`` reading Apple binary property lists (``bplist00``, offsets via ``struct``).

Documented error: ``plistlib.InvalidFileException`` (a ``ValueError``) for a malformed file.
"""

import plistlib

MODULES = ("plistlib",)


def target(data: bytes) -> None:
    try:
        plistlib.loads(data, fmt=plistlib.FMT_BINARY)
    except plistlib.InvalidFileException:
        pass
