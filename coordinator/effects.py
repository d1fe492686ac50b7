"""What the coordinator core asks the IO shell to do: frozen effects, one kind per action.

The core (coordinator/core.py) changes only its own state and returns these; the shell
(coordinator/campaign.py: the pump, the journal writer thread, outputs, logs) carries them out
in order and decides nothing. A test of the core is a list of frames in and a list of these out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from symfence.coordinator.journal import CorpusEntry
from symfence.coordinator.scheduler import WorkItem
from symfence.protocol.ids import Rank
from symfence.protocol.messages import Result
from symfence.protocol.reasons import Reason


@dataclass(frozen=True, slots=True)
class Send:
    """Send one frame to a rank (tag: protocol.messages.Tag)."""

    rank: Rank
    tag: int
    frame: bytes


@dataclass(frozen=True, slots=True)
class Flush:
    """The journal's group commit is due: hand what its mirror buffered to the writer (one write)."""


@dataclass(frozen=True, slots=True)
class Quarantined:
    """A result the fence did not let through (counted in the core's stats already): log it."""

    source: Rank
    reason: Reason
    detail: str = ""
    token: str | None = None
    work_id: str | None = None
    owner: Rank | None = None


@dataclass(frozen=True, slots=True)
class SaveFinding:
    """A durable finding: write its file under crashes/ or hangs/ (and log `finding.saved`)."""

    kind: str
    finding_id: int
    data: bytes
    detail: str
    target: str
    identity: str | None
    sig: str | None


@dataclass(frozen=True, slots=True)
class SaveUnconfirmed:
    """A crash/hang claim whose re-run did not agree: keep its input and account under
    unconfirmed/ for the user (a bug that needs the state earlier inputs left), not as a finding."""

    number: int
    kind: str
    data: bytes
    detail: str
    target: str
    claimed_by: Rank
    rerun_by: Rank
    rerun_status: str


@dataclass(frozen=True, slots=True)
class ExportAfl:
    """Durable corpus entries: export them to AFL++'s side (when it runs)."""

    entries: tuple[CorpusEntry, ...]


@dataclass(frozen=True, slots=True)
class Minimized:
    """A minimization's result came back (fenced, committed): keep the smaller input (triage.py writes it)."""

    item: WorkItem
    result: Result
    source: Rank
    found_s: float


@dataclass(frozen=True, slots=True)
class HostReport:
    """A worker's CHECKED ("checked") or forwarded LOG ("log") frame, or its HELLO's host ("hello")."""

    rank: Rank
    kind: str
    info: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Stop:
    """The core decided the campaign ends (work exhausted, budget reached, every worker lost)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Log:
    """One structured event (`noun.verb`) at a level: info, warning or error."""

    level: str
    event: str
    fields: Mapping[str, Any] = field(default_factory=dict)


Effect = Send | Flush | Quarantined | SaveFinding | SaveUnconfirmed | ExportAfl | Minimized | HostReport | Stop | Log
