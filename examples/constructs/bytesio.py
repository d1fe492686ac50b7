"""io.BytesIO: read, readline, seek, tell and getvalue of the input."""

import io

from examples.constructs import Found


def target(data: bytes) -> None:
    f = io.BytesIO(data)
    if f.read(4) != b"RIFF":
        return
    line = f.readline()
    if line != b"ok\n":
        return
    where = f.tell()
    size = int.from_bytes(f.read(2), "little")
    f.seek(where)
    if size == 0x1234 and f.read(1) == b"\x34" and f.getvalue()[-1] == 0x21:
        raise Found("BytesIO")
