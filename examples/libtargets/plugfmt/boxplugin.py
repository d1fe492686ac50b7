"""The BOX format: a 4-byte magic and a length byte."""
from . import FormatError


def accept(prefix: bytes) -> bool:
    return prefix == b"BOX1"


def read(data: bytes) -> str:
    if len(data) < 5:
        raise FormatError("short")
    return "box" * data[4]
