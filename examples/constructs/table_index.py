"""A symbolic index into constant tables (bytes, tuple) and a dict, kept as a z3 array / If chain."""

from examples.constructs import Found

SBOX = bytes((i * 167 + 13) % 256 for i in range(256))
WEIGHTS = tuple((i * i) % 251 for i in range(256))
OPCODES = {0x10: 3, 0x20: 7, 0x30: 11, 0x40: 13}


def target(data: bytes) -> None:
    if len(data) < 3:
        return
    if SBOX[data[0]] == 0x42 and WEIGHTS[data[1]] == 156 and data[2] in OPCODES:
        if OPCODES[data[2]] == 11:
            raise Found("tables")
