"""Reads a header: magic ``0x4D474C42`` (big-endian), a little-endian version, a flags byte."""

import struct


class MagicLibBug(Exception):
    """The planted bug: version 0x0307 with the 0x40 flag set."""


class HeaderError(ValueError):
    """Not a header."""


def read_header(data: bytes) -> dict:
    if len(data) < 7:
        raise HeaderError("short")
    (magic,) = struct.unpack(">I", data[:4])
    if magic != 0x4D474C42:
        raise HeaderError("magic")
    version = int.from_bytes(data[4:6], "little")
    flags = data[6]
    if version == 0x0307 and flags & 0x40:
        raise MagicLibBug(f"version {version:#x} flags {flags:#x}")
    return {"version": version, "flags": flags}
