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
import functools
import hashlib
import os
import re
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

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
_FAULT_FRAME_LINE = re.compile(r'^\s*File "(.*)", line (\d+) in (.+)$')  # faulthandler's, innermost first
_FAULT_HEAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ .*\(most recent call first\):$|"
                         r"^Stack \(most recent call first\):$")
_TRACEBACK_HEAD = "Traceback (most recent call last):"
_DIRECT_CAUSE = "The above exception was the direct cause of the following exception:"
_DURING_HANDLING = "During handling of the above exception, another exception occurred:"
# where protocol.rules.fit_text cut a long detail for the wire: with the partial line either side
_CUT = re.compile(r"[^\n]*\n\[\.\.\. \d+ characters cut \.\.\.\]\n[^\n]*(\n|$)")
_REPEATED = re.compile(r"^\s*\[Previous line repeated \d+ more times?\]$")
# faulthandler's names of the fatal signals (its "Fatal Python error: <name>" line)
_FATAL_SIGNALS = {"Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
                  "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL"}
HANG_TYPE = "timeout"  # a hang's identity type
# heads the stack of a hung Python execution in a hang's detail (worker/concolic/replay.py):
# the frames that stayed active over several samples after the deadline, traceback order
HANG_STACK_MARK = "Stack of the hung execution (frames active at every sample, most recent call last):"

Frame = tuple[str, str, str]  # (file name, function, source line or "")


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


def stdlib_module(path: str) -> str | None:
    """The module name of a standard-library file (``/usr/lib/python3.11/xml/dom/minidom.py`` ->
    ``xml.dom.minidom``), None for a file outside it."""
    rel = next((path[len(d):] for d in _STDLIB_DIRS if path.startswith(d)), None)
    if rel is None:
        m = _STDLIB_PATTERN.search(path)
        if m is None:
            return None
        rel = path[m.end():]
    if rel.endswith(".py"):
        rel = rel[:-3]
    parts = [p for p in re.split(r"[/\\]", rel) if p]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or None


def _in_modules(module: str, modules: frozenset[str]) -> bool:
    """Whether ``module`` is one of ``modules`` or inside one of them (a package)."""
    parts = module.split(".")
    return any(".".join(parts[:i]) in modules for i in range(1, len(parts) + 1))


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


# --- the code under test ------------------------------------------------------------------------

def _module_file(name: str) -> str | None:
    """The source file of module ``name`` found on sys.path (as an import would, without importing)."""
    parts = name.split(".")
    for root in [p or os.getcwd() for p in sys.path]:
        base = os.path.join(root, *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


IMPLIED = "~"  # marks a module the harness only imports (see code_under_test)


def _harness_modules(module: str) -> frozenset[str]:
    """The modules a harness file names as its code under test: its ``MODULES`` list (the
    examples' convention), and, marked ``IMPLIED``, those it imports (what the default
    ``coverage.include`` measures, and what ``atheris.instrument_imports()`` around them covers)."""
    import ast

    path = _module_file(module)
    if path is None:
        return frozenset()
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(IMPLIED + a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(IMPLIED + node.module)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MODULES"
                                                  for t in node.targets):
            if isinstance(node.value, (ast.Tuple, ast.List)):
                names.update(e.value for e in node.value.elts
                             if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return frozenset(names)


@functools.lru_cache(maxsize=256)
def _under_test(target: str, instrument: str, include: str) -> frozenset[str]:
    modules: set[str] = set()
    for entry in (*instrument.split(","), *include.split(",")):
        entry = entry.strip()
        if not entry:
            continue
        if os.sep in entry or entry.endswith(".py"):  # a path: its module if it is the stdlib's
            name = stdlib_module(os.path.abspath(entry))
            if name:
                modules.add(name)
        else:
            modules.add(entry)
    module = target.partition(":")[0] if target and ":" in target else ""
    if module:
        found = _harness_modules(module)
        # coverage.include's default is the target and what it imports; an explicit one replaces it
        modules |= {m for m in found if not m.startswith(IMPLIED) or not include.strip()}
    return frozenset(modules)


def code_under_test(target: str | None, options: Mapping[str, Any] | None = None) -> frozenset[str]:
    """The standard-library modules (dotted names) a Python campaign counts as code under test, so
    their frames make a crash's identity: what it instruments (``concolic.instrument``, option
    ``instrument``), what it measures (``coverage.include``, option ``cov_include``), the
    harness's ``MODULES``; and, marked ``IMPLIED``, the modules the harness imports (read from
    its source; what the default ``coverage.include`` measures), which count only when the
    harness calls the standard library directly: with other code outside the standard library
    on the stack (a library the harness drives), that library is the code under test, and a
    ``json`` the harness also imports for itself does not fill the top frames with
    ``json.decoder``'s. The same target and options give the same set on every rank and in
    every tool."""
    options = options or {}
    return _under_test(target or "", str(options.get("instrument", "") or ""),
                       str(options.get("cov_include", "") or ""))


# --- Python identities --------------------------------------------------------------------------

def _from_target(frames: Sequence[Frame], target: str | None) -> Sequence[Frame]:
    """The frames from the target function's outermost call inward (what called the target, a
    test, an engine, a replay's ``-c`` code, is not the bug's); all of them if it is not there."""
    if not target or ":" not in target:
        return frames
    module, _, function = target.partition(":")
    name = f"{module.rsplit('.', 1)[-1]}.{function}"
    for i, (fn, func, _) in enumerate(frames):
        if python_frame_name(fn, func) == name:
            return frames[i:]
    return frames


def _keep(frames: Sequence[Frame], target: str | None, under_test: frozenset[str]) -> list[Frame]:
    """The frames of the code under test, innermost first: only from the target's call inward;
    symfence's, Atheris's and pytest's never; the standard library's when the target's module is
    there or the frame's module is under test; every frame again if that leaves none."""
    inner = [f for f in reversed(_from_target(frames, target)) if not _is_own(f[0])]
    keep_std = target_in_stdlib(target)
    modules = frozenset(m for m in under_test if not m.startswith(IMPLIED))
    harness = (target or "").partition(":")[0].rsplit(".", 1)[-1]
    if not any(not _is_stdlib(fn) and python_frame_name(fn, "x")[:-2] != harness for fn, _, _ in inner):
        modules |= {m[len(IMPLIED):] for m in under_test if m.startswith(IMPLIED)}  # only the harness calls

    def kept(path: str) -> bool:
        if keep_std or not _is_stdlib(path):
            return True
        module = stdlib_module(path)
        return module is not None and _in_modules(module, modules)

    return [f for f in inner if kept(f[0])] or inner


def _names(frames: Sequence[Frame]) -> list[str]:
    return [python_frame_name(fn, func) for fn, func, _ in frames]


def _assert_site(frame: Frame) -> str:
    """An assertion's frame name with its statement's short hash: two asserts of one function
    are two checks (two bugs); the statement's text, not its line number, so an edit elsewhere
    keeps it."""
    source = " ".join(frame[2].split())
    name = python_frame_name(frame[0], frame[1])
    return f"{name}#{hashlib.sha256(source.encode()).hexdigest()[:6]}" if source else name


def _recursion_frames(inner: list[Frame]) -> tuple[str, ...] | None:
    """A RecursionError's frames: the cycle (the functions that repeat, by name, at most 3) and
    the frames that entered it, so the depth at which the limit hit does not matter; None if
    nothing repeats."""
    names = _names(inner)
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    cycle = sorted(n for n, c in counts.items() if c >= 2)
    if not cycle:
        return None
    outermost = max(i for i, n in enumerate(names) if n in cycle)
    entry = [n for n in names[outermost + 1:] if n not in cycle]
    return ("cycle:" + "+".join(cycle[:TOP_FRAMES]), *entry[:TOP_FRAMES - 1])


def _python_identity(crash_type: str, frames: Sequence[Frame], target: str | None,
                     under_test: frozenset[str]) -> CrashIdentity:
    """frames: (filename, function, source), outermost first (traceback order)."""
    chosen = _keep(frames, target, under_test)
    names: tuple[str, ...] = ()
    if crash_type.rsplit(".", 1)[-1] == "RecursionError":
        names = _recursion_frames(chosen) or ()
    if not names:
        names = tuple(_names(chosen[:TOP_FRAMES]))
        if names and crash_type.rsplit(".", 1)[-1] == "AssertionError":
            names = (_assert_site(chosen[0]), *names[1:])
    return CrashIdentity(crash_type, names, IdentitySource.PYTHON if names else IdentitySource.NONE)


def _resolve(target: str | None, under_test: Iterable[str] | None) -> frozenset[str]:
    return code_under_test(target) if under_test is None else frozenset(under_test)


def identity_from_python_exception(exc: BaseException, target: str | None = None,
                                   under_test: Iterable[str] | None = None) -> CrashIdentity:
    """The identity of an exception the target raised: that of its formatted traceback (one
    rule for both forms)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return identity_from_python_traceback(text, target, under_test)


def _exception_type(line: str, frames: Sequence[Frame] = ()) -> str:
    """The exception's type as the traceback prints it (module-qualified unless a builtin), but
    without its module when that is the module of the frame that raised it: a class raised where
    it is defined keeps its plain name (``ParseError``), one raised from C code or another module
    keeps its module (``struct.error`` and ``zlib.error`` are two types)."""
    head = line.split(":", 1)[0].strip()
    name = head if head and " " not in head else (head.split()[0] if head else "unknown")
    module, dot, bare = name.rpartition(".")
    if dot and frames and python_frame_name(frames[-1][0], "x")[:-2] == module.rpartition(".")[2]:
        return bare
    return name


@dataclass
class _Block:
    """One exception of a printed chain: its frames (outermost first), its type, and how it is
    tied to the exception printed before it."""

    frames: list[Frame]
    crash_type: str
    cause_of_next: bool = False  # the next block was raised ``from`` this one


def _parse_frames(lines: Sequence[str], pattern: re.Pattern[str]) -> tuple[list[Frame], int]:
    """Frames from `lines` (each File line with the source line under it); the index after them."""
    frames: list[Frame] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = pattern.match(line)
        if m:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            indent = len(line) - len(line.lstrip())
            source = ""
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) > indent and not pattern.match(nxt) \
                    and not _REPEATED.match(nxt):
                source = nxt.strip()
                i += 1
            frames.append((m.group(1), m.group(3).strip(), source))
        elif line.strip() and not line[0].isspace() and frames:
            break
        elif line.strip() and not line[0].isspace() and line.startswith(_TRACEBACK_HEAD):
            pass
        elif line.strip() and not line[0].isspace():
            break
        i += 1
    return frames, i


def _chain(text: str) -> list[_Block]:
    """The exceptions of a printed traceback, in print order (the raised one last)."""
    blocks: list[_Block] = []
    text = _CUT.sub("\n", text)
    chunks = re.split(r"^(%s|%s)$" % (re.escape(_DIRECT_CAUSE), re.escape(_DURING_HANDLING)),
                      text, flags=re.M)
    for k in range(0, len(chunks), 2):
        lines = chunks[k].strip("\n").splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith(_TRACEBACK_HEAD)]
        body = lines[starts[-1] + 1:] if starts else lines
        frames, end = _parse_frames(body, _FRAME_LINE)
        exc_line = next((l for l in body[end:] if l.strip() and not l[0].isspace()), "")
        if not exc_line:
            exc_line = next((l for l in reversed(lines) if l.strip()), "unknown")
        block = _Block(frames, _exception_type(exc_line, frames))
        if blocks and k >= 2:
            blocks[-1].cause_of_next = chunks[k - 1] == _DIRECT_CAUSE
        blocks.append(block)
    return blocks


def identity_from_python_traceback(text: str, target: str | None = None,
                                   under_test: Iterable[str] | None = None) -> CrashIdentity:
    """The identity of a formatted traceback (``traceback.format_exception``): the raised
    exception's type and frames; raised ``from`` another (a wrapper), the type ``Outer<-Root``
    and the frames of the root cause, so two causes behind one wrapper stay two bugs."""
    modules = _resolve(target, under_test)
    blocks = _chain(text.rstrip())
    if not blocks:
        return CrashIdentity("unknown")
    outer = root = blocks[-1]
    i = len(blocks) - 1
    while i > 0 and blocks[i - 1].cause_of_next:
        i -= 1
        root = blocks[i]
    if root is not outer and root.frames:
        return _python_identity(f"{outer.crash_type}<-{root.crash_type}", root.frames, target, modules)
    return _python_identity(outer.crash_type, outer.frames, target, modules)


def _faulthandler_stack(text: str) -> list[Frame] | None:
    """The first thread's frames of a faulthandler dump, outermost first; None if there is none."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _FAULT_HEAD.match(line.strip()):
            frames, _ = _parse_frames(lines[i + 1:], _FAULT_FRAME_LINE)
            return list(reversed(frames))
    return None


def _fatal_python_signal(text: str) -> str | None:
    m = re.search(r"^Fatal Python error: (.+)$", text, re.M)
    return _FATAL_SIGNALS.get(m.group(1).strip(), "fatal") if m else None


def identity_from_hang(detail: str, target: str | None = None,
                       under_test: Iterable[str] | None = None) -> CrashIdentity:
    """A hang's identity: ``timeout`` and the top frames of the code under test that stayed
    active while the execution overran (``HANG_STACK_MARK``'s stack, else a faulthandler dump
    taken at the deadline; a native hang: the ``BACKTRACE_MARK`` of a gdb run stopped at the
    deadline). No stack: no frames (such hangs are not deduplicated)."""
    modules = _resolve(target, under_test)
    if HANG_STACK_MARK in detail:
        frames, _ = _parse_frames(detail.split(HANG_STACK_MARK, 1)[1].lstrip("\n").splitlines(), _FRAME_LINE)
        return _python_identity(HANG_TYPE, frames, target, modules)
    if BACKTRACE_MARK in detail:
        return identity_from_native_backtrace(detail.split(BACKTRACE_MARK, 1)[1], HANG_TYPE)
    stack = _faulthandler_stack(detail)
    if stack:
        return _python_identity(HANG_TYPE, stack, target, modules)
    return CrashIdentity(HANG_TYPE)


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


def identity_from_detail(detail: str, target: str | None = None, edges: Iterable[int] | None = None,
                         under_test: Iterable[str] | None = None, *, kind: str = "crash") -> CrashIdentity:
    """The identity of a finding from its detail text (what the confirming rank reported): a
    sanitizer report, a gdb backtrace, a Python process's fatal signal with faulthandler's stack,
    a Python traceback, or a bare ``SIGNAME: ...`` line; with no frame in it, the edge path
    (`edges`, the crashing input's trace) when given. ``kind="hang"``: ``identity_from_hang``.
    ``under_test``: the stdlib modules counted as code under test (``code_under_test``; None:
    the target's own imports)."""
    if kind == "hang":
        return identity_from_hang(detail, target, under_test)
    fatal = _fatal_python_signal(detail)
    stack = _faulthandler_stack(detail) if fatal else None
    if is_sanitizer_report(detail):
        ident = identity_from_sanitizer_report(detail)
    elif BACKTRACE_MARK in detail:
        ident = identity_from_native_backtrace(detail.split(BACKTRACE_MARK, 1)[1], native_crash_type(detail))
    elif fatal and stack:  # a Python process killed by a signal (C extension code): its Python frames
        ident = _python_identity(fatal, stack, target, _resolve(target, under_test))
    elif _TRACEBACK_HEAD in detail or _FRAME_LINE.search(detail) or not native_crash_type(detail):
        ident = identity_from_python_traceback(detail, target, under_test)
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
