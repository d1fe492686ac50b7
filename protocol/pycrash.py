"""Crash identities of Python targets: tracebacks, faulthandler dumps, hangs, framed in the code under test.

``identity_from_python_exception(exc, target)`` and, for a formatted traceback,
``identity_from_python_traceback(text, target)`` give the same identity. Frames of symfence
itself, of Atheris/pytest and (unless the target's own module is in the standard library, or
the module is counted as code under test: ``code_under_test``) of the standard library are
skipped; a frame is ``<file stem>.<function>``, no line number, so an unrelated edit does not
change it. An exception raised ``from`` another is known by its root cause; a RecursionError
by its cycle; an assertion by its statement. A hang (``identity_from_hang``) by the frames that
stayed active past the deadline; a Python process killed by a signal
(``identity_from_fatal_python_signal``) by the Python frames of faulthandler's dump.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import os
import re
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from symfence.protocol.crashkey import TOP_FRAMES, CrashIdentity, IdentitySource
from symfence.protocol.nativecrash import BACKTRACE_MARK, identity_from_native_backtrace

_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # symfence's own folder
_OWN_DIRS = tuple(os.path.join(_PKG_ROOT, d) + os.sep
                  for d in ("protocol", "coordinator", "worker", "symfence"))
_OWN_PATTERN = re.compile(r"[/\\]symfence[/\\](protocol|coordinator|worker)[/\\]")
_TOOL_PATTERN = re.compile(r"[/\\](atheris|_pytest|pluggy|pytest|hypothesis)[/\\]|[/\\]pytest_[^/\\]*\.py$")
_STDLIB_PATTERN = re.compile(r"[/\\]lib[/\\]python3(\.\d+)?[/\\](?!.*(site|dist)-packages)")
_INSTALLED = re.compile(r"[/\\](site|dist)-packages[/\\]")  # an installed package's folder
_FRAME_LINE = re.compile(r'^\s*File "(.*)", line (\d+), in (.+)$')
_FAULT_FRAME_LINE = re.compile(r'^\s*File "(.*)", line (\d+) in (.+)$')  # faulthandler's, innermost first
_FAULT_HEAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ .*\(most recent call first\):$|"
                         r"^Stack \(most recent call first\):$")
_TRACEBACK_HEAD = "Traceback (most recent call last):"
_DIRECT_CAUSE = "The above exception was the direct cause of the following exception:"
_DURING_HANDLING = "During handling of the above exception, another exception occurred:"
# where protocol.rules.fit_text cut a long detail for the wire: with the partial line either side
_CUT = re.compile(r"[^\n]*\n\[\.\.\. \d+ characters cut \.\.\.\]\n[^\n]*(\n|$)")
_REPEATED = re.compile(r"^\s*\[(Previous (line|\d+ frames) repeated \d+ more times?|\d+ frames omitted)\]$")
# ^ Python's marker of a line repeated, and compact_traceback's
FOLD_MAX_PERIOD = 64  # the longest cycle of frames compact_traceback folds
KEEP_FRAMES = (60, 40)  # compact_traceback: a stack still longer keeps this many outermost, innermost
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
    """Whether a frame's file is the standard library's. An installed package never is: a venv's
    (and Debian's) ``site-packages``/``dist-packages`` sit inside a standard-library folder
    (``<venv>/lib/python3.11/``), and counting them there dropped a library's frames from every
    identity, so all of a package's crashes of one type were one bug."""
    if _INSTALLED.search(path):
        return False
    return path.startswith(_STDLIB_DIRS) or bool(_STDLIB_PATTERN.search(path))


def stdlib_module(path: str) -> str | None:
    """The module name of a standard-library file (``/usr/lib/python3.11/xml/dom/minidom.py`` ->
    ``xml.dom.minidom``), None for a file outside it."""
    if _INSTALLED.search(path):
        return None
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


def first_repeating(names: Iterable[str]) -> str | None:
    """A recursion's name: the first, in sorted order, of ``names`` that occur more than once
    (None: nothing repeats). The crash identity and the fuzz process's signature both use it."""
    counts = collections.Counter(names)
    return min((name for name, count in counts.items() if count > 1), default=None)


def _recursion_frames(inner: list[Frame]) -> tuple[str, ...] | None:
    """A RecursionError's frames: the recursion, named by the first (in sorted order) of the
    functions that repeat, and the frames that called into it (outward of the outermost repeating
    frame); None if nothing repeats. Neither the depth at which the limit hit, nor which of a
    parser's functions the input happened to nest through (``{{((`` and ``{{[[`` in a template
    engine run different subsets of one recursive descent), nor at which of them the recursion
    was entered (pycparser's declarators enter its expression grammar at the unary, cast,
    assignment... expression, by the input's syntax), nor where a cut of the text fell in the
    cycle changes it: one missing depth limit, one bug."""
    names = _names(inner)  # innermost first
    named = first_repeating(names)
    if named is None:
        return None
    counts = collections.Counter(names)
    entered = max(i for i, n in enumerate(names) if counts[n] > 1)  # the outermost repeating frame
    return ("cycle:" + named, *names[entered + 1:entered + TOP_FRAMES])


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


def _fold(blocks: list[str]) -> tuple[list[str], str, list[str]] | None:
    """The longest run of a repeating cycle of frames folded: (the frames up to and including
    its first two turns, the marker line, the frames after the run); None when nothing repeats
    three times or more. Two turns are kept so the cycle's every frame still repeats."""
    best: tuple[int, int, int, int] | None = None  # (frames folded, period, run start, turns folded)
    n = len(blocks)
    for p in range(1, min(FOLD_MAX_PERIOD, n // 3) + 1):
        i = p
        while i < n:
            if blocks[i] != blocks[i - p]:
                i += 1
                continue
            start = i
            while i < n and blocks[i] == blocks[i - p]:
                i += 1
            turns = (i - start) // p - 1  # whole turns past the two kept
            if turns >= 1 and (best is None or turns * p > best[0]):
                best = (turns * p, p, start, turns)
    if best is None:
        return None
    _, p, start, turns = best
    marker = f"  [Previous {p} frames repeated {turns} more time{'s' if turns > 1 else ''}]"
    return blocks[:start + p], marker, blocks[start + p + turns * p:]


def _fitting(blocks: Iterable[str], budget: int) -> int:
    """How many of ``blocks``, from the first, fit in ``budget`` characters (each with its newline)."""
    count = 0
    for block in blocks:
        budget -= len(block) + 1
        if budget < 0:
            break
        count += 1
    return count


def _frames_in(block: str) -> int:
    """How many frames a block of a stack stands for: one, or as many as its marker says."""
    marker = _REPEATED.match(block)
    if marker is None:
        return 1
    numbers = [int(n) for n in re.findall(r"\d+", block)]
    if "frames omitted" in block:
        return numbers[0]
    return numbers[0] * numbers[1] if len(numbers) == 2 else numbers[0]  # frames x turns; a line x turns


def compact_traceback(text: str, limit: int | None = None) -> str:
    """A formatted traceback with its repeated cycles of frames folded into one marker line each
    (``[Previous 14 frames repeated 25 more times]``, as Python itself folds one line repeated),
    the rest unchanged; a text without frames comes back as it is. A RecursionError through a
    mutually recursive parser prints hundreds of frames: cut to the wire's limit (head and tail)
    it lost where the recursion was entered, which its identity is made of. A stack still longer
    than ``KEEP_FRAMES`` (nesting through several paths) keeps its outermost and innermost frames;
    with ``limit`` (the characters the text will be cut to), only as many whole frames of each end
    as fit in two fifths of it each, so a cut of the text to ``limit`` does not land inside the
    stack (it kept ~500 characters of the head: the three outermost frames, not where a library's
    recursion began)."""
    if text.count('File "') < 9:  # too short to be worth folding
        return text
    out: list[str] = []
    run: list[str] = []  # the frame blocks of the current stack, each a File line and its source

    def flush() -> None:
        rest, stack = run, []
        for _ in range(8):  # a few different cycles in one stack at most
            folded = _fold(rest)
            if folded is None:
                break
            head, marker, rest = folded
            stack += [*head, marker]
        stack += rest
        outer, inner = KEEP_FRAMES
        if limit is not None and sum(len(block) + 1 for block in stack) > limit * 4 // 5:
            outer = min(outer, max(1, _fitting(stack, limit * 2 // 5)))
            inner = min(inner, max(1, _fitting(reversed(stack), limit * 2 // 5)))
        if len(stack) > outer + inner:  # no single cycle (nesting by several paths): both ends
            omitted = sum(map(_frames_in, stack[outer:len(stack) - inner]))
            stack[outer:len(stack) - inner] = [f"  [{omitted} frames omitted]"]
        out.extend(stack)
        run.clear()

    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FRAME_LINE.match(line):
            indent = len(line) - len(line.lstrip())
            j = i + 1
            while j < len(lines) and lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) > indent \
                    and not _FRAME_LINE.match(lines[j]):
                j += 1
            run.append("\n".join(lines[i:j]))
            i = j
            continue
        if run and _REPEATED.match(line):  # a marker of frames left out: part of the same stack
            run.append(line)
            i += 1
            continue
        flush()
        out.append(line)
        i += 1
    flush()
    return "\n".join(out)


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
    """The frames of a faulthandler dump, outermost first: the current thread's (the one the
    signal hit; a dump of all threads lists the others first), else the first thread's; None
    if there is none."""
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if _FAULT_HEAD.match(line.strip())]
    if not heads:
        return None
    first = next((i for i in heads if lines[i].strip().startswith("Current thread")), heads[0])
    frames, _ = _parse_frames(lines[first + 1:], _FAULT_FRAME_LINE)
    return list(reversed(frames))


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


def identity_from_fatal_python_signal(detail: str, target: str | None = None,
                                      under_test: Iterable[str] | None = None) -> CrashIdentity | None:
    """A Python process killed by a signal (C extension code): the signal and the Python frames of
    faulthandler's dump; None unless the detail has both."""
    fatal = _fatal_python_signal(detail)
    stack = _faulthandler_stack(detail) if fatal else None
    if not fatal or not stack:
        return None
    return _python_identity(fatal, stack, target, _resolve(target, under_test))


def has_python_frames(detail: str) -> bool:
    """Whether the detail holds a Python traceback (its head or a frame line)."""
    return _TRACEBACK_HEAD in detail or bool(_FRAME_LINE.search(detail))
