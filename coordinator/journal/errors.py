"""The journal's errors, each phrased as one line (the base `JournalError` is integrity.py's)."""

from __future__ import annotations

from symfence.coordinator.integrity import JournalDamagedError, JournalError

__all__ = [
    "JournalDamagedError", "JournalError", "JournalExistsError", "JournalLockedError",
    "JournalNotFoundError", "JournalReadOnlyError", "LeaseError",
]


class JournalExistsError(JournalError):
    """The output directory already holds a journal and resume was not asked for."""


class JournalNotFoundError(JournalError):
    """A read-only open of a journal that does not exist."""


class JournalLockedError(JournalError):
    """Another process has the journal open for writing."""


class JournalReadOnlyError(JournalError):
    """A mutation on a journal opened read-only (or closed)."""


class LeaseError(JournalError):
    """A lease move the transition table does not allow (leases.TRANSITIONS), e.g. lease() of a
    work item that is unknown or not pending: a coordinator bug. Nothing was changed."""
