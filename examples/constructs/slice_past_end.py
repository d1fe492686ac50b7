"""A slice past the end compared with a constant: the comparison asks for a longer input."""

from examples.constructs import Found


def target(data: bytes) -> None:
    if data[2:6] == b"ABCD" and data[8:10] == b"\x13\x37":
        raise Found("slice past the end")
