"""The single result sender: the only way a genuine RESULT leaves a worker, and always by the wire's rules."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Callable

import structlog

from symfence.protocol.codec import BATCH_HEAD_BYTES, LocalProtocolError, encode, pack_frames
from symfence.protocol.ids import DispatchToken, is_valid_token
from symfence.protocol.messages import Candidate, Cost, Result, Status
from symfence.protocol.pycrash import compact_traceback
from symfence.protocol.rules import (COUNT_MAX, DEFAULT_LIMITS, SECONDS_MAX, Limits, fit_counters, fit_text,
                                     fit_tokens)

log = structlog.get_logger()
_CANDIDATE_OVERHEAD = 256  # msgpack framing and fixed fields of one candidate, generously
_RESULT_OVERHEAD = 4096  # the fixed fields of a RESULT, generously


class ResultSender:
    """Copies the result and overwrites its token with the token of the WORK it answers.

    Every exit path of the worker (success, crash, hang, executor exception, input
    materialization failure) answers through `send`, so none can forget or forge the token.
    Before a result is encoded it is made to fit the campaign's limits (`fit`); one that still
    breaks a rule is never sent as it is: it goes as a task error naming the field and the
    value (counted in `unsendable`, logged once per field as `result.unsendable`).

    Results may be held (`hold`) to share one frame with the next ones (`flush`, at most
    `max_batch` to a frame and never more than the message size); each keeps its own token and
    is fenced on its own at rank 0. `send` transmits at once, after whatever is held.
    """

    def __init__(self, transmit: Callable[[bytes], None], limits: Limits = DEFAULT_LIMITS) -> None:
        self._transmit = transmit
        self.limits = limits
        self.max_batch = 1
        self.sent = 0  # results transmitted
        self.frames = 0  # frames they went in
        self.unsendable = 0
        self.held: list[bytes] = []  # sealed results waiting for `flush`, in order
        self.held_since = 0.0  # monotonic: when the oldest of them was held
        self._held_bytes = 0
        self._logged: set[str] = set()

    def seal(self, token: DispatchToken, result: Result) -> bytes:
        """The frame `send` would transmit: a copy of the result stamped with `token`."""
        if not is_valid_token(token):
            raise ValueError("refusing to answer without a valid dispatch token")
        result = fit(replace(result, token=token), self.limits)
        try:
            return encode(result, self.limits)
        except LocalProtocolError as exc:
            return self._refused(result, exc)

    def send(self, token: DispatchToken, result: Result) -> bytes:
        """Transmit the result now (after anything held, which keeps its order)."""
        frame = self.seal(token, result)
        self.flush()
        self._transmit(frame)
        self.sent += 1
        self.frames += 1
        return frame

    def hold(self, token: DispatchToken, result: Result) -> None:
        """Seal the result and keep it for the next `flush` (sent at once when that fills a frame)."""
        frame = self.seal(token, result)
        if BATCH_HEAD_BYTES + self._held_bytes + len(frame) > self.limits.max_message_bytes:
            self.flush()  # it would not share a frame with them
        if not self.held:
            self.held_since = time.monotonic()
        self.held.append(frame)
        self._held_bytes += len(frame)
        if len(self.held) >= self.max_batch:
            self.flush()

    def flush(self) -> None:
        """Transmit what is held, in as few frames as `max_batch` and the message size allow."""
        if not self.held:
            return
        held, self.held, self._held_bytes = self.held, [], 0
        for frame in pack_frames("results", held, self.max_batch, self.limits):
            self._transmit(frame)
            self.frames += 1
        self.sent += len(held)

    def _refused(self, result: Result, exc: LocalProtocolError) -> bytes:
        self.unsendable += 1
        if exc.field not in self._logged:
            self._logged.add(exc.field)
            log.error("result.unsendable", field=exc.field, detail=exc.detail, work_id=result.work_id[:16],
                      status=result.status.value, note="sent as a task error instead (a bug in symfence)")
        error = fit_text(f"symfence could not send this task's result: it breaks the wire's rules at"
                         f" {exc.detail} (a bug in symfence; please report it)", self.limits.max_text_bytes)
        for cost in (result.cost, Cost()):
            try:
                return encode(Result(result.token, result.work_id, Status.ERROR, cost=cost, error=error),
                              self.limits)
            except LocalProtocolError:
                continue
        raise AssertionError("an error result with an empty cost always encodes")


def _seconds(v: float) -> float:
    return min(max(float(v), 0.0), SECONDS_MAX) if math.isfinite(v) else 0.0


def _fits(result: Result, limits: Limits) -> bool:
    """True when `fit` would change nothing, checked cheaply for the common case (no candidates,
    counters or tokens, a short error text, a plain cost)."""
    cost = result.cost
    return (not result.candidates and not result.stats and not result.tokens
            and len(result.error) <= limits.max_text_bytes
            and len(result.trace) + 4 * len(result.error) <= limits.max_message_bytes - _RESULT_OVERHEAD
            and type(cost.execs) is int and 0 <= cost.execs <= COUNT_MAX
            and all(type(v) is float and 0.0 <= v <= SECONDS_MAX for v in (cost.wall_s, cost.cpu_s, cost.solver_s)))


def fit(result: Result, limits: Limits) -> Result:
    """The result made to keep the wire's rules where that loses nothing that matters: names
    made keys, texts cut (their ends kept), counts saturated, dictionary tokens cut; and
    candidates the limits cannot carry dropped (findings kept first), counted in its stats."""
    if _fits(result, limits):
        return result
    text = limits.max_text_bytes
    kept: list[tuple[int, Candidate]] = []
    dropped = {"size": 0, "count": 0, "message": 0}
    budget = (limits.max_message_bytes - _RESULT_OVERHEAD - len(result.trace)
              - 4 * min(len(result.error), text))
    findings_first = sorted(range(len(result.candidates)),
                            key=lambda i: result.candidates[i].kind is Status.OK)
    for i in findings_first:
        c = result.candidates[i]
        if len(c.data) > limits.max_candidate_bytes or len(c.trace) > limits.max_candidate_bytes:
            dropped["size"] += 1
            continue
        if len(kept) >= limits.max_candidates:
            dropped["count"] += 1
            continue
        detail = fit_text(compact_traceback(c.detail, text), text)  # a recursion's frames folded first
        size = _CANDIDATE_OVERHEAD + len(c.data) + len(c.trace) + 4 * len(detail)
        if size > budget:
            dropped["message"] += 1
            continue
        budget -= size
        kept.append((i, Candidate(c.data, c.sha256, c.trace, c.kind, min(c.bound, COUNT_MAX), c.new_bits,
                                  detail)))
    kept.sort(key=lambda ic: ic[0])  # the executor's order
    stats = dict(result.stats)
    for why, n in dropped.items():
        if n:
            stats[f"candidates_dropped_{why}"] = stats.get(f"candidates_dropped_{why}", 0) + n
    cost = result.cost
    return replace(
        result,
        candidates=tuple(c for _, c in kept),
        cost=Cost(_seconds(cost.wall_s), _seconds(cost.cpu_s), _seconds(cost.solver_s),
                  min(max(cost.execs, 0), COUNT_MAX) if type(cost.execs) is int else cost.execs),
        error=fit_text(result.error, text),
        stats=fit_counters(stats),
        tokens=fit_tokens(result.tokens),
    )
