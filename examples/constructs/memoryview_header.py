"""memoryview of the input: a frame header unpacked from a view, the body's view copied out (hyperframe's)."""

import struct

from examples.constructs import Found


def target(data: bytes) -> None:
    view = memoryview(data)
    if not isinstance(view, memoryview) or type(view) is not memoryview or len(view) < 5:
        return
    length, kind = struct.unpack(">HB", view[:3])
    body = view[3:3 + length]
    if kind == 0x04 and length == 2 and body.tobytes() == b"ok" and body.nbytes == 2:
        raise Found("memoryview")
