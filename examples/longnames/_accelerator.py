"""Registers the "C accelerator" module: a module without a source file whose functions are C functions."""

from __future__ import annotations

import importlib
import sys
import types

# Imported past the import statement: the engine rewrites this package's imports, and these
# must be the real C functions, as a compiled accelerator module would hold.
zlib, binascii = importlib.import_module("zlib"), importlib.import_module("binascii")

NAME = "längenprüfung_beschleuniger_für_sehr_lange_qualifizierte_bibliotheksnamen"  # 73 characters
FUNCTIONS = {
    "checksum_of_the_record_header_including_the_magic_and_the_length_fields": zlib.crc32,
    "prüfsumme_über_den_nutzdatenblock_einschließlich_aller_füllbytes_am_ende": zlib.adler32,
    "hexadecimal rendering with spaces in its registered name": binascii.hexlify,
}


def install() -> types.ModuleType:
    module = sys.modules.get(NAME)
    if module is None:
        module = types.ModuleType(NAME, "C helpers (simulated: a module without __file__)")
        for attr, fn in FUNCTIONS.items():
            setattr(module, attr, fn)
        sys.modules[NAME] = module
    return module


install()
