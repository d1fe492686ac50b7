"""A LEB128 varint read in a loop with shifts (NOT found yet: see docs/harnesses.md, "Engine reach").

The input must grow byte by byte as continuation bits demand; the engine grows it and reaches
the comparisons with multi-byte values, but the second varint needs a continuation bit below the
generational bound of the input that first matched the first value.
"""

from examples.constructs import Found


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise EOFError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def target(data: bytes) -> None:
    try:
        length, pos = read_varint(data, 0)
        tag, pos = read_varint(data, pos)
    except EOFError:
        return
    if length == 300_000 and tag == 150:
        raise Found("varint")
