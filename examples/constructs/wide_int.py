"""int.from_bytes wider than 64 bits (a 128-bit magic), a signed 64-bit field, to_bytes and a shift."""

from examples.constructs import Found


def target(data: bytes) -> None:
    value = int.from_bytes(data[:16], "big")
    if value == 0x0123456789ABCDEF_FEDCBA9876543210:
        if int.from_bytes(data[16:24], "little", signed=True) == -2:
            if len(data) > 24 and (value >> 100).to_bytes(4, "little")[0] + data[24] == 0x100:
                raise Found("128-bit")
