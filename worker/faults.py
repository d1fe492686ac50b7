"""The fault injector: deliberately bad RESULT frames, enabled only from the config's [faults].

Each kind is sent with its configured probability per genuine result, at a moment that makes
the coordinator's classification exact, and counted (and logged as `fault.injected`) only once
it is really on its way:
- stale, missing, malformed_token, non_map, oversized, wrong_version: just before the genuine
  result of a token this rank holds (so the rank has something in flight: stale, not unowned);
- duplicate: a byte copy of the genuine result, right after it (MPI keeps the order);
- misrouted: the token is handed to another worker over a separate communicator; that worker
  sends a result for it with a synchronous send (matched by the coordinator) and acknowledges,
  and only then does the owner send its own genuine result, which must still commit;
- unowned: owed, and sent when STOP arrives (the coordinator has nothing in flight any more);
- late: the genuine result is held back until the coordinator revokes its token (the CANCEL
  arrives after the dispatch deadline, or at the end of the campaign), then sent: a result
  delayed in the network past its deadline.
And one that stands for a bug in symfence rather than a hostile or broken network:
- buggy_result: the genuine result is replaced by one with its own token and a counter name the
  wire's rules refuse (the 80-character names of issue 17), sent past the sender's checks. The
  coordinator must refuse it as malformed and, unlike the kinds above, report it as a bug
  (coordinator/refusals.py); the dispatch is left to expire and be retried.
And one fault on the way in:
- drop_work: a WORK that arrived is forgotten, as if the message had been lost; the next
  heartbeat shows the coordinator a token it sent but the worker does not hold (lost-message
  repair must revoke and requeue it; no result is ever sent for it).
"""

from __future__ import annotations

import collections
import random
import secrets
import time
from typing import Any

import msgpack
import structlog

from symfence.protocol.codec import encode_map, result_to_map
from symfence.protocol.ids import DispatchToken, WorkId
from symfence.protocol.messages import PROTOCOL_VERSION, Result, Status, Tag
from symfence.worker.endpoint import Endpoint

log = structlog.get_logger()

EXPECTED_REASON = {
    "duplicate": "duplicate",
    "stale": "stale",
    "missing": "missing",
    "malformed_token": "malformed",
    "non_map": "malformed",
    "oversized": "malformed",
    "misrouted": "misrouted",
    "unowned": "unowned",
    "wrong_version": "incompatible",
    "late": "expired",
    "buggy_result": "malformed",
}
# Faults that are not results: no quarantine reason, counted by the coordinator elsewhere.
WORK_FAULTS = ("drop_work",)
# Faults that stand for a bug in symfence: reported as one (coordinator/refusals.py), exit status 5.
BUG_FAULTS = ("buggy_result",)
BEFORE = ("stale", "missing", "malformed_token", "non_map", "oversized", "wrong_version")
COORDINATOR = 0


class FaultInjector:
    def __init__(self, cfg: dict[str, Any], world: Endpoint, peers: Endpoint, world_size: int,
                 max_message_bytes: int) -> None:
        self.p = {k: float(cfg.get(k, 0.0)) for k in (*EXPECTED_REASON, *WORK_FAULTS)}
        self.rank = world.rank
        self.rng = random.Random(int(cfg.get("seed", 1)) * 1_000_003 + self.rank)
        self.world = world
        self.peers = peers
        self.max_message_bytes = max_message_bytes
        others = [r for r in range(1, world_size) if r != self.rank]
        self.peer = others[(self.rank - 1) % len(others)] if others else None
        self.counts: collections.Counter[str] = collections.Counter()
        self.unowned_owed = 0
        self.acks: set[str] = set()
        self.held_back: dict[str, bytes] = {}  # token -> genuine frame withheld as `late`

    def _roll(self, kind: str) -> bool:
        return self.p[kind] > 0 and self.rng.random() < self.p[kind]

    def _sent(self, kind: str, **kw: Any) -> None:
        self.counts[kind] += 1
        log.info("fault.injected", kind=kind, expected_reason=EXPECTED_REASON.get(kind), **kw)

    def drop_work(self, token: DispatchToken) -> bool:
        """Whether to forget this WORK as if it had been lost on the way."""
        if self._roll("drop_work"):
            self._sent("drop_work", token=token[:16])
            return True
        return False

    # --- hooks around the genuine result -----------------------------------------------------

    def before_result(self, token: DispatchToken, result: Result) -> None:
        for kind in BEFORE:
            if self._roll(kind):
                self.world.send(COORDINATOR, Tag.RESULT, self._bad_frame(kind, result))
                self._sent(kind, work_id=result.work_id[:16])
        if self.peer is not None and self._roll("misrouted"):
            self._hand_off(token, result.work_id)
        if self._roll("unowned"):
            self.unowned_owed += 1

    def replace_buggy(self, token: DispatchToken, result: Result) -> bool:
        """Whether the genuine result was replaced by a `buggy_result` (then it is not sent)."""
        if not self._roll("buggy_result"):
            return False
        m = result_to_map(result)
        m["token"] = token
        m["stats"] = {**m["stats"], "concretised_" + "a_very_long_qualified_library_function_name." * 2: 1}
        self.world.send(COORDINATOR, Tag.RESULT, encode_map(m))
        self._sent("buggy_result", token=token[:16])
        return True

    def hold_back(self, token: DispatchToken) -> bool:
        """Whether to withhold this genuine result until its token is revoked."""
        return self._roll("late")

    def held(self, token: DispatchToken, frame: bytes) -> None:
        self.held_back[token] = frame

    def on_cancel(self, token: DispatchToken) -> bool:
        """The token was revoked: release its withheld result now (it must classify expired)."""
        frame = self.held_back.pop(token, None)
        if frame is None:
            return False
        self.world.send(COORDINATOR, Tag.RESULT, frame)
        self._sent("late", token=token[:16])
        return True

    def after_result(self, frame: bytes) -> None:
        if self._roll("duplicate"):
            self.world.send(COORDINATOR, Tag.RESULT, frame)
            self._sent("duplicate")

    def at_stop(self) -> None:
        for _ in range(self.unowned_owed):
            m = result_to_map(Result(DispatchToken(secrets.token_hex(32)), WorkId("0" * 64), Status.OK))
            self.world.send(COORDINATOR, Tag.RESULT, encode_map(m))
            self._sent("unowned")
        self.unowned_owed = 0

    def _bad_frame(self, kind: str, result: Result) -> bytes:
        m = result_to_map(result)
        if kind == "stale":
            m["token"] = secrets.token_hex(32)
        elif kind == "missing":
            m.pop("token", None)
        elif kind == "malformed_token":
            m["token"] = secrets.token_hex(32).upper()
        elif kind == "non_map":
            return msgpack.packb([m.get("work_id"), "not a map"], use_bin_type=True)
        elif kind == "oversized":
            m["token"] = secrets.token_hex(32)
            m["error"] = "x" * (self.max_message_bytes + 1)
        elif kind == "wrong_version":
            m["token"] = secrets.token_hex(32)
            m["v"] = PROTOCOL_VERSION + 1
        return encode_map(m)

    # --- misrouting over the peer communicator ----------------------------------------------------

    def _hand_off(self, token: DispatchToken, work_id: WorkId, timeout_s: float = 30.0) -> None:
        """Give our in-flight token to the peer, and wait until its result is at the coordinator."""
        self.peers.send(self.peer, Tag.PEER, msgpack.packb({"op": "misroute", "token": token, "work_id": work_id}))
        until = time.monotonic() + timeout_s
        while token not in self.acks:
            if time.monotonic() > until:
                log.error("fault.handoff_timeout", token=token[:16], peer=self.peer)
                return
            if not self.serve_peers():
                time.sleep(0.0002)
        self.acks.discard(token)

    def serve_peers(self) -> bool:
        """Handle hand-offs and acks from other workers; True if anything arrived."""
        msgs = self.peers.poll()
        for source, _tag, frame in msgs:
            m = msgpack.unpackb(frame)
            if m["op"] == "ack":
                self.acks.add(m["token"])
                continue
            r = Result(DispatchToken(m["token"]), WorkId(m["work_id"]), Status.OK)
            if self.world.send_synchronous(COORDINATOR, Tag.RESULT, encode_map(result_to_map(r)), 30.0):
                self._sent("misrouted", owner_rank=source)
            self.peers.send(source, Tag.PEER, msgpack.packb({"op": "ack", "token": m["token"]}))
        return bool(msgs)
