"""Reads one stamp record (see the package docstring)."""

import re

MAGIC = b"\x89STP"
SEAL = 0x5D1A3C7E
STAMP = re.compile(r"v(\d{3})-([a-z]{2,4})")


class StampError(ValueError):
    """Not a valid record."""


class StampBug(Exception):
    """The planted bug."""


def mix(key: int) -> int:
    """A 32-bit bijective mix (two xorshift32 rounds): libFuzzer's comparison hooks see its
    result, never the key; z3 inverts it at once."""
    h = key & 0xFFFFFFFF
    for _ in range(2):
        h ^= (h << 13) & 0xFFFFFFFF
        h ^= h >> 17
        h ^= (h << 5) & 0xFFFFFFFF
    return h


def read_record(data: bytes) -> tuple[int, str]:
    if data[:4] != MAGIC:
        raise StampError("magic")
    key = int.from_bytes(data[4:8], "little")
    if mix(key) != SEAL:
        raise StampError("seal")
    try:
        text = data[8:].decode("ascii")
    except UnicodeDecodeError:
        raise StampError("not ascii") from None
    m = STAMP.fullmatch(text)
    if m is None:
        raise StampError("stamp")
    number, suffix = int(m.group(1)), m.group(2)
    if number == 418 and suffix.startswith("zq"):
        raise StampBug(f"stamp {text}")
    return number, suffix
