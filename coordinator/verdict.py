"""The verdict on a current result (pure): what of its claims the coordinator believes, and why not the rest.

Step 3 of the walk of one result (docs/design.md, "The coordinator"): after the fence said
`current`, `triage()` judges what the result claims against what rank 0 measured and knows,
changes nothing, and returns a frozen `ResultVerdict`. The commit (`coordinator/core.py`)
then applies it: merges the admitted traces into the coverage map, journals the new entries,
counts the rejections, punishes the sender `penalties` times and files the claims.

Two rejections are not decided here, because they are outcomes of the commit's own writes:
`NO_NEW_BITS` (a candidate's edges were merged by an earlier candidate of the same result, or
are in the map already) and `DUPLICATE_INPUT` (the journal has that input). Claimed crashes and
hangs become claims (`coordinator/confirm.py`), judged when their re-run comes back.
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Protocol

from symfence.protocol.coverage import unpack_trace
from symfence.protocol.ids import Rank, sha256_hex
from symfence.protocol.messages import Candidate, Result, Status

FINDING_STATUS = frozenset({Status.CRASH, Status.HANG})  # a result or candidate that claims a finding


class Rejection(str, enum.Enum):
    """Why a candidate (or a result's claim) was not taken; counted as `triage_rejected_<value>`."""

    OVER_WORK = "over_work"  # more candidates than executions: the surplus
    BAD_SHA256 = "bad_sha256"  # a candidate's data does not hash to its claimed sha256
    COVERAGE_CAP = "coverage_cap"  # more never-seen edges than the measured work allows (peers.py)
    BAD_TRACE = "bad_trace"  # an undecodable edge trace
    NO_NEW_BITS = "no_new_bits"  # (commit) nothing new for the map
    DUPLICATE_INPUT = "duplicate_input"  # (commit) the journal has this input for this target
    KNOWN_CRASH = "known_crash"  # (claims) a crash whose identity is known
    KNOWN_HANG = "known_hang"  # (claims) a hang whose identity (its stack at the deadline) is known
    CLAIMS_BACKLOG = "claims_backlog"  # (claims) the rank has too many unconfirmed claims
    DUPLICATE_CLAIM = "duplicate_claim"  # (claims) the same input is claimed already


_NONE: tuple[()] = ()
_new = tuple.__new__  # builds a ResultVerdict without its Python-level __new__ (hot path)


class EdgeRoom(Protocol):
    """What the verdict may ask of the per-rank budgets (peers.py), read-only."""

    def edge_room(self, rank: Rank, execs: int, now: float) -> int:
        """The never-seen edges `rank` may add at `now` for a result of `execs` executions."""


class ResultVerdict(NamedTuple):
    """What to commit of one current result, decided by `triage()` (immutable).

    A NamedTuple, not a frozen dataclass: one is built per committed result, on the hot path,
    and a frozen slotted dataclass took 1.9 us to build here against 0.3 us (CPython 3.11);
    `triage` builds it with `tuple.__new__`, all fields in order.
    """

    task_trace: dict[int, int] | None  # the task's own edges to merge; None: capped, merge nothing
    admitted: tuple[tuple[Candidate, dict[int, int]], ...]  # candidates (and traces) to merge, in order
    claims: tuple[Candidate, ...]  # candidates claiming a crash/hang, data matching their sha256
    claims_task: bool  # the task's own input claims a crash/hang (the result's status)
    rejected: tuple[tuple[Rejection, int], ...]  # counts, only those above 0
    penalties: int  # garbage points for the sender (over-work, a coverage cap)
    new_edges: int  # never-seen edges claimed and allowed: spent from the rank's budget
    capped: tuple[int, int] | None  # (never-seen edges claimed, allowance) when capped


def triage(result: Result, execs: int, seen: bytes | bytearray, room: EdgeRoom, source: Rank,
           now: float) -> ResultVerdict:
    """Judge a current result from `source` whose believable executions are `execs`
    (peers.plausible_execs).

    `seen` is the coverage map's seen bytes (read, never written); `room.edge_room(source,
    execs, now)` the sender's allowance of never-seen edges at `now` (a read-only query, asked
    only when the result claims some). Pure: the same arguments give the same verdict, and
    nothing changes.
    """
    candidates = result.candidates
    rejected: list[tuple[Rejection, int]] = []
    penalties = 0
    if len(candidates) > execs:  # every candidate costs the worker one execution
        rejected.append((Rejection.OVER_WORK, len(candidates) - execs))
        candidates = candidates[:execs]
        penalties += 1
    # Decoded traces: the task's, then each candidate's (None for an undecodable one).
    capped = None
    new_edges = 0
    if not result.trace and not any(c.trace for c in candidates):  # claims no coverage: nothing
        traces: list[dict[int, int] | None] | None = [{} for _ in range(1 + len(candidates))]
    else:
        traces = []
        for packed in (result.trace, *[c.trace for c in candidates]) if candidates else (result.trace,):
            try:
                traces.append(unpack_trace(packed) if packed else {})
            except ValueError:
                traces.append(None)
        if traces[0] is None:
            rejected.append((Rejection.BAD_TRACE, 1))
            traces[0] = {}
        new = {i for t in traces if t for i in t if not seen[i]}
        if new:  # nothing never-seen: nothing to cap or spend (the budget refills by time alone)
            allowance = room.edge_room(source, execs, now)
            if len(new) > allowance:
                rejected.append((Rejection.COVERAGE_CAP, 1))
                penalties += 1
                capped = (len(new), allowance)
                traces = None
            else:
                new_edges = len(new)
    if not candidates:  # the common case: a result that carries no candidates
        return _new(ResultVerdict, (None if traces is None else traces[0], _NONE, _NONE,
                                    result.status in FINDING_STATUS, tuple(rejected) if rejected else _NONE,
                                    penalties, new_edges, capped))
    claims = []
    admitted = []
    bad_sha = cap = bad_trace = 0
    for i, c in enumerate(candidates):
        if sha256_hex(c.data) == c.sha256:
            if c.kind in FINDING_STATUS:
                claims.append(c)
            elif traces is None:
                cap += 1
            elif (t := traces[i + 1]) is None:
                bad_trace += 1
            else:
                admitted.append((c, t))
        else:
            bad_sha += 1
    for reason, n in ((Rejection.BAD_SHA256, bad_sha), (Rejection.COVERAGE_CAP, cap),
                      (Rejection.BAD_TRACE, bad_trace)):
        if n:
            rejected.append((reason, n))
    return ResultVerdict(None if traces is None else traces[0], tuple(admitted), tuple(claims),
                         result.status in FINDING_STATUS, tuple(rejected), penalties, new_edges, capped)

