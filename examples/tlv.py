"""Demo target: nested type-length-value records with a planted bug two levels deep.

A record is ``tag (1 byte), length (1 byte), value (length bytes)``. Tag 0x01 is a container
whose value is parsed again as records; tag 0x02 is a leaf. A leaf inside a container whose
value is exactly the 4 bytes of 0x0BADF00D (big-endian) triggers the bug. Random mutation has
to get the container length, the inner length and a 32-bit value right at once.
"""

CONTAINER = 0x01
LEAF = 0x02
BAD_VALUE = 0x0BADF00D
MAX_DEPTH = 4


class TlvNestingBug(Exception):
    """Planted bug: a nested leaf record holding 0x0BADF00D."""


def _parse(buf: bytes, depth: int) -> None:
    pos = 0
    while pos + 2 <= len(buf):
        tag = buf[pos]
        length = buf[pos + 1]
        end = pos + 2 + length
        if end > len(buf):
            return  # truncated record: stop quietly, as a lenient parser would
        value = buf[pos + 2 : end]
        if tag == CONTAINER:
            if depth < MAX_DEPTH:
                _parse(value, depth + 1)
        elif tag == LEAF and depth > 0:
            if len(value) == 4 and int.from_bytes(value, "big") == BAD_VALUE:
                raise TlvNestingBug(f"tlv: nested leaf at depth {depth} holds {BAD_VALUE:#010x}")
        pos = end


def target(data: bytes) -> None:
    _parse(data, 0)
