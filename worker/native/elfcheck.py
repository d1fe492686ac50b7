"""Guards on a native target before TritonDSE emulates it: x86-64, dynamic, glibc, no C++ runtime."""

from __future__ import annotations

import struct
from pathlib import Path

from symfence.worker.native.base import NativeError

_PT_INTERP = 3
_PT_DYNAMIC = 2
_UNSUPPORTED_LIBS = ("libstdc++", "libc++")


def check_tritondse_elf(path: Path) -> None:
    """Raise NativeError naming the problem when TritonDSE cannot emulate this file faithfully."""
    head = path.read_bytes()[:64]
    if head[:4] != b"\x7fELF":
        raise NativeError(f"{path} is not an ELF file (TritonDSE emulates x86-64 Linux ELF binaries)")
    if head[4] != 2 or struct.unpack_from("<H", head, 18)[0] != 62:
        raise NativeError(f"{path} is not an x86-64 ELF (TritonDSE is used here for x86-64 only)")
    phoff, = struct.unpack_from("<Q", head, 32)
    phentsize, phnum = struct.unpack_from("<HH", head, 54)
    data = path.read_bytes()
    types = {struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)}
    if _PT_INTERP not in types or _PT_DYNAMIC not in types:
        raise NativeError(f"{path} is statically linked: TritonDSE models glibc's imported functions, "
                          "so a static binary emulates libc's start-up code and fails there (a false "
                          "crash); link it dynamically (the default of cc)")
    try:
        import lief
    except ImportError:
        return
    quiet_lief(lief)
    binary = lief.parse(str(path))
    if binary is None:
        return
    for lib in binary.libraries:
        if any(lib.startswith(bad) for bad in _UNSUPPORTED_LIBS):
            raise NativeError(f"{path} needs {lib}: TritonDSE does not model the C++ runtime and "
                              "would stop silently at its first call; use the symcc engine for C++")


def quiet_lief(lief) -> None:
    """No LIEF log lines, and none of its bindings' (nanobind's) "leaked N instances" report at
    interpreter exit: LIEF leaves objects alive on purpose; the report is noise on stderr."""
    lief.logging.disable()
    disable = getattr(lief, "disable_leak_warning", None)
    if disable is not None:
        disable()
