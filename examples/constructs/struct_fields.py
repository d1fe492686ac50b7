"""struct.unpack, unpack_from and a Struct of mixed widths and byte orders."""

import struct

from examples.constructs import Found

HEADER = struct.Struct("<hB")


def target(data: bytes) -> None:
    if len(data) < 10:
        return
    tag, size = struct.unpack_from(">HI", data, 0)
    if tag != 0xCAFE:
        return
    (flag,) = struct.unpack("?", data[6:7])
    level, mode = HEADER.unpack(data[7:10])
    if size == 0x01020304 and flag and level == -2 and mode == 7:
        raise Found("struct")
