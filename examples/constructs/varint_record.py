"""A length-prefixed record whose length is a varint: 300 bytes of body, the last one checked."""

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
        size, pos = read_varint(data, 0)
    except EOFError:
        return
    body = data[pos:pos + size]
    if len(body) != size:
        return
    if size == 300 and body[-1] == 0x5A:
        raise Found("record")
