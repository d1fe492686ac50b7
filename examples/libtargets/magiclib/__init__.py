"""magiclib: a tiny binary header reader, the library under test of ``fuzz_magiclib.py``.

Installed-library stand-in: the harness imports it as a top-level package (its folder on
``sys.path``), as an OSS-Fuzz harness imports the package it fuzzes. The planted bug sits here,
not in the harness, behind a 4-byte magic and a 16-bit version read with ``struct`` and
``int.from_bytes`` (C code, so the engine follows it only if this package is rewritten).
"""

from magiclib.header import MagicLibBug, read_header

__all__ = ["MagicLibBug", "read_header"]
