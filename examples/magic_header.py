"""Demo target: a 4-byte magic header and a version byte guard a planted bug in the flags field.

Layout: ``b"SYMF"`` magic, version (1 byte), flags (u16 little-endian), mode (1 byte). The bug
needs the magic, version 3, flags 0xBEEF and mode ``b"!"`` at once: about 2**-64 for a random
8-byte input, but a few generations for the concolic engine from ``b"\\x00"``.
"""

MAGIC = b"SYMF"


class MagicHeaderBug(Exception):
    """Planted bug: a version-3 header with flags 0xBEEF and mode '!'."""


def target(data: bytes) -> None:
    if len(data) < 8:
        return
    if not data.startswith(MAGIC):
        return
    version = data[4]
    if version != 3:
        return
    flags = int.from_bytes(data[5:7], "little")
    if flags == 0xBEEF and data[7] == ord("!"):
        raise MagicHeaderBug(f"magic_header: v{version} header with flags {flags:#06x} and mode '!'")
