"""Helpers in another module of the targets' package (rewritten too: the whole package is)."""


def has_header(buf: bytes) -> bool:
    return len(buf) >= 6 and buf[4] == 0x5A


def checksum_ok(buf: bytes) -> bool:
    total = 0
    for b in buf[:4]:
        total = (total + b) & 0xFF
    return total == buf[5]
