"""Failpoints for crash-recovery tests: SYMFENCE_FAILPOINT=name:N SIGKILLs this process at
the N-th time it passes the named point (like FoundationDB's or TiKV's failpoints).

Points on the coordinator: `dispatch` (leased, WORK not yet sent), `commit` (journal commit
applied in memory, before its effects), `flush.before`, `flush.after` (transaction durable,
queue/ and crashes/ files not yet written). Unset in normal runs, where `hit` costs one test.
"""

from __future__ import annotations

import os
import signal

_SPEC = os.environ.get("SYMFENCE_FAILPOINT", "")
_NAME, _, _AT = _SPEC.partition(":")
_count = 0


def hit(name: str) -> None:
    global _count
    if name != _NAME:
        return
    _count += 1
    if _count == int(_AT or 1):
        os.kill(os.getpid(), signal.SIGKILL)
