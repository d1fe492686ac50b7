"""Crash identity (dedup key): the crash type plus the top 3 frames in the code under test.

As ClusterFuzz's *crash state*: two crashes are one bug when their type and their three innermost
frames in the code under test agree. Pure functions of text (or of an exception object), shared by
the coordinator (which derives the identity from the detail a worker sent), the worker (which
symbolises a native crash) and ``symfence replay`` (which re-runs a saved crash):

- Python: ``identity_from_python_exception(exc, target)`` and, for a formatted traceback,
  ``identity_from_python_traceback(text, target)`` give the same identity. Frames of symfence
  itself, of Atheris/pytest and (unless the target's own module is in the standard library) of
  the standard library are skipped; a frame is ``<file stem>.<function>``, no line number, so an
  unrelated edit does not change it.
- Native with a sanitizer: ``identity_from_sanitizer_report(text)`` (type such as
  ``heap-buffer-overflow READ 4``, frames of the first stack, sanitizer and libc frames skipped).
- Native, plain build: ``identity_from_native_backtrace(text)`` parses a gdb batch run (signal,
  ``bt``, ``info symbol $pc``): the faulting function with its offset, then its callers.
- No frame at all: ``identity_from_edge_path(edges, crash_type)``: the set of AFL edges the
  crashing input hits decides (as AFL++ does).

``identity_from_detail(detail, target, edges)`` picks the right one for a finding's detail text.
``CrashIdentity.key`` is the stable text stored in the journal and compared; ``.sig`` is its
file-name form (printable ASCII, at most ``SIG_MAX`` characters, ends with the short hash).
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
import sys
import traceback
from dataclasses import dataclass
from typing import Iterable, Sequence

TOP_FRAMES = 3  # ClusterFuzz's crash state depth
SIG_MAX = 64  # the longest `sig:` field of a crash file name
SHORT_HEX = 8  # hex digits of the short hash (in `sig:` and `symfence status`)
_KEY_SEP = " @ "
_FRAME_SEP = " > "
_SAFE = re.compile(r"[^A-Za-z0-9_.+-]")


class IdentitySource(str, enum.Enum):
    """Where an identity's frames came from."""

    PYTHON = "python"  # a Python traceback
    SANITIZER = "sanitizer"  # an ASan/UBSan/MSan/LSan report
    BACKTRACE = "backtrace"  # a debugger's backtrace of the plain build
    EDGE_PATH = "edge-path"  # no frame: the AFL edges of the crashing input
    NONE = "none"  # no frame and no path (type only)


@dataclass(frozen=True)
class CrashIdentity:
    """A crash's dedup key: type and up to TOP_FRAMES frames, innermost first."""

    crash_type: str
    frames: tuple[str, ...] = ()
    source: IdentitySource = IdentitySource.NONE

    @property
    def key(self) -> str:
        """The stable text form (journal, comparisons): ``type @ f0 > f1 > f2``."""
        return self.crash_type + (_KEY_SEP + _FRAME_SEP.join(self.frames) if self.frames else "")

    @property
    def short(self) -> str:
        """A short hash of `key`."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:SHORT_HEX]

    @property
    def sig(self) -> str:
        """The file-name form: ``type-f0-f1-f2-<short>``, [A-Za-z0-9_.+-] only, <= SIG_MAX chars."""
        body = "-".join(_SAFE.sub("_", part) for part in (self.crash_type, *self.frames))
        return f"{body[:SIG_MAX - SHORT_HEX - 1]}-{self.short}"

    @property
    def has_frames(self) -> bool:
        return bool(self.frames)

    def __str__(self) -> str:
        return self.key

    @classmethod
    def from_key(cls, key: str, source: IdentitySource = IdentitySource.NONE) -> CrashIdentity:
        """The inverse of `key` (the journal stores keys)."""
        crash_type, sep, rest = key.partition(_KEY_SEP)
        return cls(crash_type, tuple(rest.split(_FRAME_SEP)) if sep else (), source)


# --- Python -----------------------------------------------------------------------------------

_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # symfence's own folder
_OWN_DIRS = tuple(os.path.join(_PKG_ROOT, d) + os.sep
                  for d in ("protocol", "coordinator", "worker", "symfence"))
_OWN_PATTERN = re.compile(r"[/\\]symfence[/\\](protocol|coordinator|worker)[/\\]")
_TOOL_PATTERN = re.compile(r"[/\\](atheris|_pytest|pluggy|pytest|hypothesis)[/\\]|[/\\]pytest_[^/\\]*\.py$")
_STDLIB_PATTERN = re.compile(r"[/\\]lib[/\\]python3(\.\d+)?[/\\](?!.*(site|dist)-packages)")
_FRAME_LINE = re.compile(r'^\s*File "(.*)", line (\d+), in (.+)$')


def _stdlib_dirs() -> tuple[str, ...]:
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple({os.path.abspath(paths[k]) + os.sep for k in ("stdlib", "platstdlib") if k in paths})


_STDLIB_DIRS = _stdlib_dirs()


def _is_own(path: str) -> bool:
    return path.startswith("<") or path.startswith(_OWN_DIRS) or bool(_OWN_PATTERN.search(path)) \
        or bool(_TOOL_PATTERN.search(path))


def _is_stdlib(path: str) -> bool:
    return path.startswith(_STDLIB_DIRS) or bool(_STDLIB_PATTERN.search(path))


def target_in_stdlib(target: str | None) -> bool:
    """Whether a ``module:function`` target's own module is in the standard library."""
    if not target:
        return False
    top = target.partition(":")[0].split(".")[0]
    return top in sys.stdlib_module_names


def python_frame_name(filename: str, function: str) -> str:
    """``<file stem>.<function>`` (a package's ``__init__.py`` is named by its folder)."""
    base = os.path.basename(filename)
    stem = base[:-3] if base.endswith(".py") else base
    if stem == "__init__":
        stem = os.path.basename(os.path.dirname(filename)) or stem
    return f"{stem}.{function.strip()}"


def _python_identity(crash_type: str, frames: Sequence[tuple[str, str]], target: str | None) -> CrashIdentity:
    """frames: (filename, function), outermost first (traceback order)."""
    inner = [f for f in reversed(frames) if not _is_own(f[0])]
    keep_std = target_in_stdlib(target)
    chosen = [f for f in inner if keep_std or not _is_stdlib(f[0])] or inner
    names = tuple(python_frame_name(fn, func) for fn, func in chosen[:TOP_FRAMES])
    return CrashIdentity(crash_type, names, IdentitySource.PYTHON if names else IdentitySource.NONE)


def identity_from_python_exception(exc: BaseException, target: str | None = None) -> CrashIdentity:
    """The identity of an exception the target raised (its traceback's frames)."""
    frames = [(f.filename, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    return _python_identity(type(exc).__name__, frames, target)


def _exception_type(line: str) -> str:
    head = line.split(":", 1)[0].strip()
    return head.rsplit(".", 1)[-1] if head and " " not in head else (head.split()[0] if head else "unknown")


def identity_from_python_traceback(text: str, target: str | None = None) -> CrashIdentity:
    """The identity of a formatted traceback (``traceback.format_exception``): the last
    exception of a chain, its frames."""
    lines = text.rstrip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    body = lines[starts[-1] + 1:] if starts else lines
    frames: list[tuple[str, str]] = []
    exc_line = ""
    for line in body:
        m = _FRAME_LINE.match(line)
        if m:
            frames.append((m.group(1), m.group(3)))
        elif line and not line[0].isspace():
            exc_line = line
            break
    if not exc_line:
        exc_line = next((l for l in reversed(lines) if l.strip()), "unknown")
    return _python_identity(_exception_type(exc_line), frames, target)


# --- native: sanitizer reports ------------------------------------------------------------------

_SAN_ERROR = re.compile(r"ERROR: (AddressSanitizer|MemorySanitizer|LeakSanitizer|ThreadSanitizer|"
                        r"UndefinedBehaviorSanitizer): ([A-Za-z0-9_-]+(?: [a-z]+ [a-z]+)?)")
_SAN_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)")
_SAN_SIGNAL_ACCESS = re.compile(r"The signal is caused by a (READ|WRITE) memory access")
_UBSAN = re.compile(r": runtime error: ([^:,0-9']+)")
_SAN_FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-fA-F]+ (?:in )?(.*)$")
_RUNTIME_FUNCS = re.compile(r"^(__asan|__interceptor_|___interceptor_|__sanitizer|__ubsan|__lsan|__msan|"
                            r"__tsan|__libc_start|_start$|__GI_|__pthread_kill|raise$|abort$|"
                            r"__assert_fail|__sigsetjmp|__restore_rt|_dl_)")
_RUNTIME_MODULES = re.compile(r"lib(asan|ubsan|lsan|msan|tsan|clang_rt[^/]*|c|pthread)[.-][^/]*so|/sysdeps/|"
                              r"compiler-rt/|/libsanitizer/")


def is_sanitizer_report(text: str) -> bool:
    return bool(_SAN_ERROR.search(text) or _UBSAN.search(text))


def _native_frame(rest: str) -> str | None:
    """A sanitizer stack line's frame after the address: ``func`` or ``module+0xoff``; None for
    the sanitizer runtime and libc."""
    rest = rest.strip()
    if rest.startswith("("):  # unsymbolised: (/path/module+0x1234)
        loc = rest.strip("()")
        if _RUNTIME_MODULES.search(loc):
            return None
        return os.path.basename(loc.split(" ")[0])
    func, _, loc = rest.partition(" ")
    if _RUNTIME_FUNCS.match(func) or (loc and _RUNTIME_MODULES.search(loc)):
        return None
    return func


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
_GDB_FRAME = re.compile(r"^#(\d+)\s+(?:0x[0-9a-fA-F]+ in )?(\S+) \((.*)$")
_GDB_SYMBOL = re.compile(r"^(\S+) \+ (\d+) in section")
_GDB_PC_SYMBOL = re.compile(r"^(\S+) in section")


def identity_from_native_backtrace(text: str, crash_type: str | None = None) -> CrashIdentity:
    """The identity of a gdb batch run (``run``, ``bt``, ``info symbol $pc``) of the plain build:
    the signal, the faulting function with its offset, then its callers (libc frames skipped)."""
    sig = _GDB_SIGNAL.search(text)
    ctype = crash_type or (sig.group(1) if sig else "crash")
    offset: str | None = None
    frames: list[tuple[int, str]] = []
    for line in text.splitlines():
        line = line.strip()
        m = _GDB_FRAME.match(line)
        if m:
            func, rest = m.group(2), m.group(3)
            if func == "??" or _RUNTIME_FUNCS.match(func) or _RUNTIME_MODULES.search(rest):
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


# --- no frames: the edge path -------------------------------------------------------------------

def identity_from_edge_path(edges: Iterable[int], crash_type: str = "crash") -> CrashIdentity:
    """The identity of a crash no frame names: the set of AFL edges its input hits."""
    ordered = sorted(set(int(e) for e in edges))
    digest = hashlib.sha256(b"".join(e.to_bytes(4, "little") for e in ordered)).hexdigest()[:12]
    return CrashIdentity(crash_type, (f"path:{digest}",), IdentitySource.EDGE_PATH)


# --- a finding's detail -------------------------------------------------------------------------

_SIGNAL_LINE = re.compile(r"^(SIG[A-Z0-9]+)\b", re.M)


def native_crash_type(detail: str) -> str | None:
    """``SIGSEGV`` etc. from a native detail's ``SIGNAME: what`` line, if it has one."""
    m = _SIGNAL_LINE.search(detail)
    return m.group(1) if m else None


def identity_from_detail(detail: str, target: str | None = None,
                         edges: Iterable[int] | None = None) -> CrashIdentity:
    """The identity of a finding from its detail text (what the confirming rank reported): a
    sanitizer report, a gdb backtrace, a Python traceback, or a bare ``SIGNAME: ...`` line; with
    no frame in it, the edge path (`edges`, the crashing input's trace) when given."""
    if is_sanitizer_report(detail):
        ident = identity_from_sanitizer_report(detail)
    elif BACKTRACE_MARK in detail:
        ident = identity_from_native_backtrace(detail.split(BACKTRACE_MARK, 1)[1], native_crash_type(detail))
    elif "Traceback (most recent call last):" in detail or _FRAME_LINE.search(detail) or \
            not native_crash_type(detail):
        ident = identity_from_python_traceback(detail, target)
    else:
        ident = CrashIdentity(native_crash_type(detail) or "crash")
    if not ident.frames and edges is not None:
        trace = list(edges)
        if trace:
            return identity_from_edge_path(trace, ident.crash_type)
    return ident


def legacy_signature(detail: str) -> str:
    """The dedup key before crash identities (journals written then): the exception line's
    type plus the innermost traceback line."""
    lines = [l.strip() for l in detail.strip().splitlines() if l.strip()]
    if not lines:
        return "unknown"
    frames = [l for l in lines if l.startswith("File ")]
    return f"{lines[-1].split(':', 1)[0]} @ {frames[-1] if frames else '?'}"


def legacy_sig(detail: str) -> str:
    """The `sig:` file-name field before crash identities (the exception type only)."""
    return _SAFE.sub("_", legacy_signature(detail).split(_KEY_SEP)[0]).replace("+", "_")[:40]
