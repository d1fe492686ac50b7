"""for/enumerate over the input, no len(): the end of the iteration grows the input."""

from examples.constructs import Found


def target(data: bytes) -> None:
    seen = 0
    for i, b in enumerate(data):
        if i == 5 and b == 0x42 and seen == 0x41 + 0x4C:
            raise Found("enumerate")
        if i in (1, 3):
            seen += b
