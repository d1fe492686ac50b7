"""Failpoints for crash-recovery and storage-fault tests: SYMFENCE_FAILPOINT=name:N[:action]
makes this process fail the N-th time it passes the named point (like FoundationDB's or TiKV's
failpoints). The action is `kill` (SIGKILL, the default), an errno name (`ENOSPC`, `EROFS`,
`EIO`, ...: the write at that point raises that OSError, as a full or read-only disk would),
`raise` (a RuntimeError: any unexpected exception) or `sigint` (SIGINT to this process, as a
Ctrl-C reaching it at that moment).

Points on the coordinator: `dispatch` (leased, WORK not yet sent), `commit` (journal commit
applied in memory, before its effects), `flush.before`, `flush.after` (transaction durable,
queue/ and crashes/ files not yet written), `seed` (before the seeds are journaled),
`seed.step` (a step of the background seeding is journaled in memory, not yet durable), `stats`
(before fuzzer_stats is written), `queue` (before a queue/ file is written), `finalize` (the
campaign loop has returned, MPI_Finalize is next). Unset in normal runs, where `hit` costs one
comparison.
"""

from __future__ import annotations

import errno
import os
import signal

_SPEC = os.environ.get("SYMFENCE_FAILPOINT", "")
_NAME, _, _REST = _SPEC.partition(":")
_AT, _, _ACTION = _REST.partition(":")
_count = 0
ARMED = bool(_NAME)  # hot paths test this before calling `hit` (one attribute read, no call)


def hit(name: str, path: object = None) -> None:
    global _count
    if name != _NAME:
        return
    _count += 1
    if _count != int(_AT or 1):
        return
    action = _ACTION or "kill"
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "sigint":
        os.kill(os.getpid(), signal.SIGINT)
    elif action == "raise":
        raise RuntimeError(f"failpoint {name}:{_AT}")
    else:
        code = getattr(errno, action)
        raise OSError(code, os.strerror(code), None if path is None else str(path))
