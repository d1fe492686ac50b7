"""Crash identities of native targets: from a sanitizer report, or a debugger's backtrace of the plain build.

- With a sanitizer: ``identity_from_sanitizer_report(text)`` (type such as
  ``heap-buffer-overflow READ 4``, frames of the first stack, sanitizer and libc frames skipped).
- Plain build: ``identity_from_native_backtrace(text)`` parses a gdb batch run (signal, ``bt``,
  ``info symbol $pc``, ``info proc mappings``): the faulting function with its offset, then its
  callers; a frame of a stripped binary as ``<binary>+0x<offset>``.

Pure functions of text, like the rest of ``crashid``.
"""

from __future__ import annotations

import os
import re

from symfence.protocol.crashkey import TOP_FRAMES, CrashIdentity, IdentitySource

_SAN_ERROR = re.compile(r"ERROR: (AddressSanitizer|MemorySanitizer|LeakSanitizer|ThreadSanitizer|"
                        r"UndefinedBehaviorSanitizer): ([A-Za-z0-9_-]+(?: [a-z]+ [a-z]+)?)")
_SAN_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)")
_SAN_SIGNAL_ACCESS = re.compile(r"The signal is caused by a (READ|WRITE) memory access")
_UBSAN = re.compile(r": runtime error: ([^:,0-9']+)")
_SAN_FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-fA-F]+ (?:in )?(.*)$")
_RUNTIME_FUNCS = re.compile(r"^(__asan|__interceptor_|___interceptor_|__sanitizer|__ubsan|__lsan|__msan|"
                            r"__tsan|__libc_start|_start$|__GI_|__pthread_kill|raise$|abort$|"
                            r"__assert_fail|__sigsetjmp|__restore_rt|_dl_)")
_PROCESS_START = re.compile(r"^(__libc_start_main|__libc_start_call_main)")
_RUNTIME_MODULES = re.compile(r"lib(asan|ubsan|lsan|msan|tsan|clang_rt[^/]*|c|pthread)[.-][^/]*so|/sysdeps/|"
                              r"compiler-rt/|/libsanitizer/")


def is_sanitizer_report(text: str) -> bool:
    return bool(_SAN_ERROR.search(text) or _UBSAN.search(text))


_BUILD_ID = re.compile(r"\s*\(BuildId: [0-9a-f]+\)$")
_LOCATION = re.compile(r"^(?:\S*/\S*|\S+:\d+(?::\d+)?)$")  # a source path (with :line:col) or a module


def native_function_name(func: str) -> str:
    """A C/C++ function's name as both gdb and the sanitizers give it: without its parameter
    list and qualifiers (``ns::Parser<int, char>::parse(int) const`` -> ``ns::Parser<int,char>::parse``),
    without spaces (so a template's ``, `` neither cuts the name nor meets the key's separators)."""
    f = re.sub(r"\s+(const|volatile|&|&&)$", "", func.strip())
    if f.endswith(")"):
        depth = 0
        for i in range(len(f) - 1, -1, -1):
            if f[i] == ")":
                depth += 1
            elif f[i] == "(":
                depth -= 1
                if depth == 0:
                    f = f[:i] if i > 0 else f
                    break
    return "".join(f.split())


def _native_frame(rest: str) -> str | None:
    """A sanitizer stack line's frame after the address: ``func`` or ``module+0xoff``; None for
    the sanitizer runtime and libc. An inlined function has a line of its own (same address)."""
    rest = _BUILD_ID.sub("", rest.strip())
    if rest.startswith("("):  # unsymbolised: (/path/module+0x1234)
        loc = rest.strip("()")
        if _RUNTIME_MODULES.search(loc):
            return None
        return os.path.basename(loc.split(" ")[0])
    func, loc = rest, ""
    if rest.endswith(")") and " (" in rest and "+0x" in rest.rsplit(" (", 1)[1]:
        func, loc = rest.rsplit(" (", 1)  # "func (module+0x1234)"
    elif " " in rest and _LOCATION.match(rest.rsplit(" ", 1)[1]):
        func, loc = rest.rsplit(" ", 1)  # "func /src/file.c:12:3"
    if _RUNTIME_FUNCS.match(func) or (loc and _RUNTIME_MODULES.search(loc)):
        return None
    return native_function_name(func)


def identity_from_sanitizer_report(text: str) -> CrashIdentity:
    """The identity of an ASan/UBSan/MSan/LSan report: bug type (with access kind and size for
    memory errors) and the top frames of its first stack."""
    lines = text.splitlines()
    crash_type, start = "sanitizer", 0
    for i, line in enumerate(lines):
        m = _SAN_ERROR.search(line)
        if m:
            kind = m.group(2).split(" on ")[0]
            crash_type = "memory-leak" if m.group(1) == "LeakSanitizer" else kind
            start = i
            for later in lines[i + 1:i + 6]:
                a = _SAN_ACCESS.search(later.strip()) or _SAN_SIGNAL_ACCESS.search(later)
                if a:
                    crash_type += f" {a.group(1)}" + (f" {a.group(2)}" if a.lastindex == 2 else "")
                    break
            break
        u = _UBSAN.search(line)
        if u:
            crash_type, start = "ubsan " + re.sub(r"\s+", "-", u.group(1).strip()), i
            break
    frames: list[str] = []
    in_stack = False
    for line in lines[start:]:
        m = _SAN_FRAME.match(line)
        if m and _PROCESS_START.match(m.group(2).strip()):
            break  # what is outer is the process's start-up (_start), not the program
        if m:
            in_stack = True
            name = _native_frame(m.group(2))
            if name and len(frames) < TOP_FRAMES:
                frames.append(name)
        elif in_stack:
            break  # the first stack only (the access's, not the allocation's)
    source = IdentitySource.SANITIZER if frames else IdentitySource.NONE
    return CrashIdentity(crash_type, tuple(frames), source)


# --- native: a debugger's backtrace -------------------------------------------------------------

BACKTRACE_MARK = "Native backtrace (gdb):"  # heads a gdb batch run's output inside a detail
_GDB_SIGNAL = re.compile(r"Program (?:received|terminated with) signal (SIG[A-Z0-9]+)")
# "#1  0x0000555555555189 in ns::Parser<int, X>::parse (this=...) at p.cc:12": a C++ name may
# hold spaces; it ends at the first " (" (its arguments); frame 0 may have no address
_GDB_FRAME = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-fA-F]+) in )?(.+?) \((.*)$")
_GDB_SYMBOL = re.compile(r"^(.+?) \+ (\d+) in section")
_GDB_PC_SYMBOL = re.compile(r"^(.+?) in section")
# `info proc mappings`: start, end, size, offset, [perms,] objfile (the binary's own, in a detail)
GDB_MAPPING = re.compile(r"^\s*(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+0x[0-9a-f]+\s+(0x[0-9a-f]+)\s+"
                         r"(?:[rwxps-]{4}\s+)?(/\S.*)$")


def _mappings(text: str) -> list[tuple[int, int, str, int]]:
    """(start, end, objfile, the objfile's load base: the start of its offset-0 range) of each
    mapped range of a gdb ``info proc mappings``."""
    ranges = []
    for line in text.splitlines():
        m = GDB_MAPPING.match(line)
        if m:
            ranges.append((int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16), m.group(4).strip()))
    base = {obj: start for start, _, off, obj in ranges if off == 0}
    return [(start, end, obj, base[obj]) for start, end, _, obj in ranges if obj in base]


def _unsymbolised(pc: int, maps: list[tuple[int, int, str, int]]) -> str | None:
    """A frame without a symbol (a stripped binary), as ``<binary>+0x<offset>``: gdb runs the
    target without address randomisation, and the offset from the binary's load base is the
    same on every run; None outside the binary's own mappings."""
    for start, end, obj, base in maps:
        if start <= pc < end and not _RUNTIME_MODULES.search(obj):
            return f"{os.path.basename(obj)}+0x{pc - base:x}"
    return None


def identity_from_native_backtrace(text: str, crash_type: str | None = None) -> CrashIdentity:
    """The identity of a gdb batch run (``run``, ``bt``, ``info symbol $pc``) of the plain build:
    the signal, the faulting function with its offset, then its callers (libc frames skipped)."""
    sig = _GDB_SIGNAL.search(text)
    ctype = crash_type or (sig.group(1) if sig else "crash")
    offset: str | None = None
    frames: list[tuple[int, str]] = []
    maps = _mappings(text)
    for line in text.splitlines():
        line = line.strip()
        m = _GDB_FRAME.match(line)
        if m:
            func, rest = native_function_name(m.group(3)), m.group(4)
            if _PROCESS_START.match(func):
                break  # what is outer is the process's start-up (_start), not the program
            if func == "??":
                name = _unsymbolised(int(m.group(2), 16), maps) if m.group(2) else None
                if name:
                    frames.append((-1, name))  # its offset is in the name already
                continue
            if _RUNTIME_FUNCS.match(func) or _RUNTIME_MODULES.search(rest):
                continue
            frames.append((int(m.group(1)), func))
            continue
        s = _GDB_SYMBOL.match(line) or _GDB_PC_SYMBOL.match(line)
        if s and offset is None:
            offset = f"+0x{int(s.group(2)):x}" if s.lastindex == 2 else "+0x0"
    names = []
    for index, func in frames[:TOP_FRAMES]:
        names.append(func + (offset if index == 0 and offset else ""))
    return CrashIdentity(ctype, tuple(names), IdentitySource.BACKTRACE if names else IdentitySource.NONE)

