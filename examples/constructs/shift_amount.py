"""Shifts by a symbolic amount (both directions) and by a symbolic value."""

from examples.constructs import Found


def target(data: bytes) -> None:
    if len(data) < 3:
        return
    if (1 << (data[0] & 63)) == 1 << 40 and (0x8000 >> data[1]) == 2 and (data[2] << 4) == 0x5A0:
        raise Found("shifts")
