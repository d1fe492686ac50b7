"""Demo target: a command is only executed when a 16-bit checksum over the payload matches.

Layout: checksum (u16 big-endian) then the payload; the checksum is the sum of the payload
bytes modulo 2**16. Command ``b"X"`` followed by the argument 0x1337 (u16 little-endian) hits
the planted bug. A mutation of the payload almost always breaks the checksum; the concolic
engine solves the command and the header field together.
"""


class ChecksumBug(Exception):
    """Planted bug: a correctly checksummed 'X' command with argument 0x1337."""


def target(data: bytes) -> None:
    if len(data) < 6:
        return
    declared = int.from_bytes(data[0:2], "big")
    payload = data[2:]
    if sum(payload) & 0xFFFF != declared:
        return  # corrupt packet
    command = payload[0]
    if command == ord("X"):
        argument = int.from_bytes(payload[1:3], "little")
        if argument == 0x1337:
            raise ChecksumBug(f"checksum: command 'X' with argument {argument:#06x} passed the checksum")
