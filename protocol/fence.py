"""The fence: classify every result of a received RESULT frame before it may touch any state (pure)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from symfence.protocol.codec import (DEFAULT_LIMITS, Limits, RemoteProtocolError, decode_result,
                                     decode_result_frame)
from symfence.protocol.ids import DispatchToken, Rank
from symfence.protocol.messages import Result
from symfence.protocol.reasons import Reason


class FenceView(Protocol):
    """What the fence may ask of the coordinator's dispatch state (read-only)."""

    def owner(self, token: DispatchToken) -> Rank | None:
        """Rank the token is in flight on, or None if it is not in flight."""

    def recently_committed(self, token: DispatchToken) -> bool: ...

    def revoked(self, token: DispatchToken) -> bool: ...

    def in_flight_count(self, rank: Rank) -> int: ...

    def work_id_of(self, token: DispatchToken) -> str | None:
        """The work_id dispatched under an in-flight token."""

    def banned(self, rank: Rank) -> bool:
        """True once the rank has been banned for sending garbage: its frames are not decoded."""


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: Reason
    result: Result | None = None  # decoded result, when it decoded
    detail: str = ""
    token: str | None = None  # the token as sent, when it was a string (for logs)
    work_id: str | None = None
    owner: Rank | None = None  # owner rank of a misrouted token


def classify_result(result: Result, source: Rank, view: FenceView) -> Verdict:
    """Token-level rows of the table, for a result that decoded cleanly."""
    token, work_id = result.token, result.work_id
    owner = view.owner(token)
    if owner is not None:
        if owner == source:
            dispatched = view.work_id_of(token)
            if dispatched is not None and dispatched != work_id:
                return Verdict(Reason.MISMATCHED, result, f"work_id differs from the dispatched {dispatched[:16]}",
                               token, work_id)
            return Verdict(Reason.CURRENT, result, "", token, work_id)
        return Verdict(Reason.MISROUTED, result, f"token owned by rank {owner}", token, work_id, owner)
    if view.recently_committed(token):
        return Verdict(Reason.DUPLICATE, result, "token already committed", token, work_id)
    if view.revoked(token):
        return Verdict(Reason.EXPIRED, result, "token revoked", token, work_id)
    if view.in_flight_count(source) == 0:
        return Verdict(Reason.UNOWNED, result, "source rank has nothing in flight", token, work_id)
    return Verdict(Reason.STALE, result, "token never issued in this epoch or long forgotten", token, work_id)


def classify(
    frame: bytes, source: Rank, view: FenceView, limits: Limits = DEFAULT_LIMITS
) -> Verdict:
    """Decode and classify one RESULT frame. Never raises: every input yields a Verdict."""
    if view.banned(source):  # judged on the source alone, before a byte is decoded
        return Verdict(Reason.BANNED, detail="source rank is banned")
    try:
        result = decode_result(frame, limits)
    except RemoteProtocolError as exc:
        return Verdict(exc.reason, detail=exc.detail, token=exc.token, work_id=exc.work_id)
    return classify_result(result, source, view)


def classify_frame(
    frame: bytes, source: Rank, view: FenceView, limits: Limits = DEFAULT_LIMITS
) -> Iterator[Verdict]:
    """Decode a RESULT frame (one result, or a batch of them) and classify each of its results
    in turn. Lazy: the caller acts on a verdict (commits or quarantines it) before the next one
    is judged, so a batch that repeats a token gets `duplicate` for the repeat, and the items
    after the one that got the rank banned are `banned`. A fault of the frame itself is one
    verdict; a fault of one item is that item's verdict alone. Never raises."""
    if view.banned(source):  # judged on the source alone, before a byte is decoded
        yield Verdict(Reason.BANNED, detail="source rank is banned")
        return
    try:
        items = decode_result_frame(frame, limits)
    except RemoteProtocolError as exc:
        yield Verdict(exc.reason, detail=exc.detail, token=exc.token, work_id=exc.work_id)
        return
    for item in items:
        if view.banned(source):
            yield Verdict(Reason.BANNED, detail="source rank is banned")
        elif isinstance(item, RemoteProtocolError):
            yield Verdict(item.reason, detail=item.detail, token=item.token, work_id=item.work_id)
        else:
            yield classify_result(item, source, view)
