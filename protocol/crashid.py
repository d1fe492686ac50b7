"""Crash identity (dedup key) of a finding: the rule for its detail text, Python, native or the edge path.

As ClusterFuzz's *crash state*: two crashes are one bug when their type and their three innermost
frames in the code under test agree (``crashkey.CrashIdentity``). Pure functions of text (or of an
exception object), shared by the coordinator (which derives the identity from the detail a worker
sent), the worker (which symbolises a native crash) and ``symfence replay`` (which re-runs a saved
crash). ``identity_from_detail(detail, target, edges)`` picks the rule for a finding's detail:

- a Python traceback, a hang's stack, a Python process's fatal signal (``pycrash``);
- a sanitizer report or a gdb backtrace of the plain build (``nativecrash``);
- no frame at all: ``identity_from_edge_path(edges, crash_type)``, the set of AFL edges the
  crashing input hits decides (as AFL++ does).

``legacy_signature``/``legacy_sig`` are the keys of journals written before crash identities.
"""

from __future__ import annotations

import hashlib
import re
from typing import Iterable

from symfence.protocol.crashkey import KEY_SEP, UNSAFE, IdentitySource
from symfence.protocol.crashkey import CrashIdentity as CrashIdentity  # re-exported: coordinator.triage
from symfence.protocol.nativecrash import (
    BACKTRACE_MARK,
    identity_from_native_backtrace,
    identity_from_sanitizer_report,
    is_sanitizer_report,
)
from symfence.protocol.pycrash import code_under_test as code_under_test  # re-exported: coordinator, tools
from symfence.protocol.pycrash import (
    has_python_frames,
    identity_from_fatal_python_signal,
    identity_from_hang,
    identity_from_python_traceback,
)

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
    if is_sanitizer_report(detail):
        ident = identity_from_sanitizer_report(detail)
    elif BACKTRACE_MARK in detail:
        ident = identity_from_native_backtrace(detail.split(BACKTRACE_MARK, 1)[1], native_crash_type(detail))
    elif (fatal := identity_from_fatal_python_signal(detail, target, under_test)) is not None:
        ident = fatal  # a Python process killed by a signal (C extension code): its Python frames
    elif has_python_frames(detail) or not native_crash_type(detail):
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
    return UNSAFE.sub("_", legacy_signature(detail).split(KEY_SEP)[0]).replace("+", "_")[:40]
