"""Why rank 0 failed, as one line for the user and an exit code; and how rank 0 ends the job.

Any exception in rank 0 ends the campaign: a failed write (full disk, read-only folder, an I/O
error: `storage`) or anything else (`internal`). The coordinator stops dispatching at once,
keeps what is durable (the journal's last group commit and the files written for it), stops the
workers so the job ends, prints one line on stderr and exits non-zero. `--resume` continues
from what is durable once the cause is fixed.
"""

from __future__ import annotations

import enum
import errno
import sqlite3
import sys
from dataclasses import dataclass
from typing import Any

from symfence.coordinator.integrity import JournalError
from symfence.coordinator.shared.interface import StaleEpochError, StoreError


class ExitCode(enum.IntEnum):
    """The documented exit codes of `symfence run` (and of rank 0 under mpiexec)."""

    OK = 0
    FAILED = 1  # the campaign ran but failed: every worker lost, MPI failed
    CONFIG = 2  # a config or output-directory problem, found before anything ran
    STORAGE = 3  # a write failed (disk full, read-only, I/O error): --resume once it is fixed
    INTERNAL = 4  # an unexpected exception in rank 0 (a bug: the traceback is in the log)
    REFUSED = 5  # the campaign ran, but a rank that is not banned had more than limits.max_refused_share
    #              of its results refused as malformed, incompatible or mismatched (a bug in symfence)
    # The campaign ended (the summary says why, its results are kept), but workers that were lost
    # (a host cut off, a rank hung) never answered STOP: rank 0 ended the job with MPI_Abort.
    # Ranks it could not reach end themselves after workers.orphan_after_s.
    RANKS_LOST = 6


class FailureKind(str, enum.Enum):
    STORAGE = "storage"
    INTERNAL = "internal"


# errno values that mean "this write cannot succeed here" (as opposed to a missing input file).
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                          errno.EIO, errno.EFBIG, errno.ENOTDIR, errno.EISDIR, errno.EEXIST})


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    line: str  # one line, no newline, starting with what failed

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.STORAGE if self.kind is FailureKind.STORAGE else ExitCode.INTERNAL


def _one_line(text: str, limit: int = 400) -> str:
    return " ".join(str(text).split())[:limit]


def describe(exc: BaseException) -> Failure:
    """The failure an exception stands for, phrased as one line."""
    resume = "; what was saved before it is kept: fix it and run again with --resume"
    if isinstance(exc, StaleEpochError):  # another process registered under this coordinator's name
        return Failure(FailureKind.STORAGE, _one_line(f"campaign store: {exc}"))
    if isinstance(exc, StoreError):  # the shared campaign store (issue 29) cannot be used
        return Failure(FailureKind.STORAGE, _one_line(f"campaign store error: {exc}") + resume)
    if isinstance(exc, JournalError):
        return Failure(FailureKind.STORAGE, _one_line(f"storage error: {exc}") + resume)
    if isinstance(exc, sqlite3.Error):
        return Failure(FailureKind.STORAGE, _one_line(f"storage error: journal: {exc}") + resume)
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else "a file"
        what = exc.strerror or str(exc)
        if exc.errno in WRITE_ERRNOS:
            return Failure(FailureKind.STORAGE, _one_line(f"storage error: cannot write {where}: {what}") + resume)
        return Failure(FailureKind.STORAGE, _one_line(f"file error: {where}: {what}") + resume)
    return Failure(
        FailureKind.INTERNAL,
        _one_line(f"internal error in the coordinator: {type(exc).__name__}: {exc}")
        + " (traceback in logs/coordinator.jsonl)",
    )


def report(failure: Failure) -> None:
    print(f"symfence: {failure.line}", file=sys.stderr, flush=True)


def rank0_failed(comm: Any, exc: BaseException, log: Any = None) -> int:
    """Last resort for an exception that escaped rank 0: stop the workers, one line, exit code.

    Called with the MPI pump already stopped (or never started), so this thread may use MPI.
    """
    failure = describe(exc)
    if log is not None:
        try:
            log.error("campaign.failed", kind=failure.kind.value, error=failure.line, exc_info=exc)
        except Exception:  # noqa: BLE001 - the log itself may be on the full disk
            pass
    stop_workers(comm)
    report(failure)
    return failure.exit_code


def stop_workers(comm: Any) -> None:
    """Send STOP to every worker rank (they exit whether or not they were set up)."""
    from mpi4py import MPI

    from symfence.protocol.codec import encode
    from symfence.protocol.messages import Control, ControlKind, Tag

    frame = encode(Control(ControlKind.STOP))
    for rank in range(1, comm.Get_size()):
        try:
            comm.Send([frame, MPI.BYTE], rank, Tag.CONTROL)
        except MPI.Exception:  # a worker MPI reports dead (ULFM) cannot be told
            pass
