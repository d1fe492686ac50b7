"""Not a construct: the input goes straight into C (zlib), so the engine records no branch (a warning names zlib)."""

import zlib


def target(data: bytes) -> None:
    try:
        zlib.decompress(data)
    except zlib.error:
        pass
