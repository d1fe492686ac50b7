"""Two LEB128 varints read in a loop with shifts and compared: the input grows as continuation bits demand.

``length == 300_000`` cannot hold for a one-byte varint: the engine's loop extension
(``worker/concolic/loops.py``) sets one more continuation bit and grows the input until it can.
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
