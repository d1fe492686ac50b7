"""A NUL-terminated name read in a loop, then compared with a constant, then a flag byte after it."""

from examples.constructs import Found


def target(data: bytes) -> None:
    end = 0
    while end < len(data) and data[end] != 0:
        end += 1
    if end >= len(data):
        return
    if data[:end] == b"admin" and data[end + 1:end + 2] == b"\x07":
        raise Found("name")
