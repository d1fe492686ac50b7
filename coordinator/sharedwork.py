"""Several coordinators, one campaign: this coordinator's side of the shared campaign store.

With `campaign.store` (or `--store`) each coordinator (rank 0 of its own MPI job) joins one
campaign held in a `shared.CampaignStore` (docs/design.md, "Beyond one coordinator"). This
module owns everything the coordinator keeps about it: its registration (name, epoch), the
leases it holds, the results whose commit is under way, the new work it has yet to add.

- **start** (after the seeds are durable): `register` takes a new epoch; the seeds (and, on a
  `--resume`, the pending work) leave the local scheduler and are added to the store as work
  items (idempotent by work id); the local scheduler is fed only by `lease` from then on, in
  batches, so any coordinator can take any pending item, and expired leases are taken over.
- **every result** of a leased item that the fence calls `current` is parked (`park`); at the
  end of its frame all parked results are committed in one `commit_batch` (the compare-and-set
  on the exact lease), and only the accepted ones are applied locally (`Campaign._commit`). A
  refused one is quarantined as `stale_lease` (its dispatch revoked as `refused`, its local
  journal lease requeued) and nothing of it is applied.
- **the ticker** renews the held leases every third of `store.lease_s`, adds new corpus
  entries to the store (`offer`), leases more when the local queue runs low, and reads the
  store's counts (the campaign's work is exhausted only when no item is pending or leased by
  anyone).
- **findings** are deduplicated across coordinators by crash identity (`new_finding`).
- **a dead epoch** (another process registered under this coordinator's name) ends the
  campaign for this coordinator, loudly: it commits nothing more.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack
import structlog

from symfence.coordinator.journal import NewEntry
from symfence.coordinator.journal.records import WorkState
from symfence.coordinator.scheduler import WorkItem as LocalItem
from symfence.coordinator.scheduler import WorkKind
from symfence.coordinator.shared import open_store
from symfence.coordinator.shared.interface import CampaignStore, StaleEpochError, StoreError
from symfence.coordinator.shared.records import (
    CoordinatorId,
    Epoch,
    ItemState,
    Lease,
    Outcome,
    RefuseReason,
    SharedFinding,
    WorkItem,
    coordinator_id,
)
from symfence.protocol.coverage import unpack_trace
from symfence.protocol.ids import Rank, WorkId
from symfence.protocol.messages import Result
from symfence.protocol.reasons import Reason

if TYPE_CHECKING:
    from symfence.coordinator.campaign import Campaign

log = structlog.get_logger()

STORE_FILE = "store.json"  # in the output directory: which store and name (`symfence status`)
GROUP_WAIT_S = 0.004  # a parked result waits at most this long for others to share its transaction
COUNTS_EVERY_S = 0.25  # how often the store's item counts are read (the "work exhausted" test)


def default_name(out_root: Path) -> CoordinatorId:
    """`<host>-<output directory name>`, as a coordinator id (stable over `--resume`)."""
    raw = f"{socket.gethostname().split('.')[0]}-{Path(out_root).resolve().name}"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", raw).lstrip("._-")[:64] or "coordinator"
    return coordinator_id(name)


def encode_item(item: Any) -> bytes:
    """A corpus work item's payload in the store: what another coordinator needs to run it."""
    return msgpack.packb({"d": item.data, "s": item.sha256, "t": item.target, "b": item.bound,
                          "n": item.new_bits, "o": item.origin}, use_bin_type=True)


def decode_item(work_id: str, payload: bytes) -> LocalItem:
    """The local scheduler's work item for a leased store item (StoreError if it is not one)."""
    try:
        d = msgpack.unpackb(payload, raw=False)
        return LocalItem(WorkId(work_id), bytes(d["d"]), str(d["s"]), str(d["t"]), int(d["b"]), None,
                         int(d["n"]), d["o"] == "seed", 0, str(d["o"]))
    except (ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
        raise StoreError(f"work item {work_id[:16]} of the campaign store has a payload symfence"
                         f" cannot read: {exc}") from None


class SharedWork:
    """This coordinator's membership of a shared campaign (state: its epoch, its held leases,
    the parked results of the frame under way, the new work not yet added)."""

    def __init__(self, store: CampaignStore, where: str, name: CoordinatorId, lease_s: float, batch: int,
                 campaign: Campaign) -> None:
        self.store = store
        self.where = where
        self.name = name
        self.lease_s = lease_s
        self.c = campaign
        slots = len(campaign.workers) * (campaign.depth if isinstance(campaign.depth, int)
                                         else campaign.cfg["dispatch.max_depth"])
        self.batch = batch or max(8, 2 * slots)
        self.group = max(1, slots)  # parked results that make a group commit due at once
        self._timer: Any = None  # the loop's timer that flushes a group after GROUP_WAIT_S
        self.epoch: Epoch | None = None
        self.held: dict[str, Lease] = {}  # work id -> the lease this coordinator holds on it
        self.lost: dict[str, Lease] = {}  # leases a renewal found ended: their results are refused
        self.parked: list[tuple[Rank, Result, Lease | None, int]] = []  # (source, result, lease, execs)
        self.parked_tokens: set[str] = set()
        self.offers: list[WorkItem] = []  # new corpus entries, not yet added to the store
        self.counts: dict[ItemState, int] = {}
        self.dead: str | None = None  # why this coordinator's epoch is dead, once it is
        self.committed = 0
        self.refused: Counter[str] = Counter()  # store refusals by reason
        self.taken_over = 0
        self.leased = 0
        self.groups = 0  # commit_batch transactions (committed + refused over groups: the mean group)
        self._next_renew = 0.0
        self._next_counts = 0.0

    @classmethod
    def open(cls, where: str, name: str, lease_s: float, batch: int, campaign: Campaign) -> SharedWork:
        """Open the store `where` names (StoreError if it cannot be used)."""
        return cls(open_store(where), where, coordinator_id(name) if name else default_name(campaign.out.root),
                   lease_s, batch, campaign)

    # --- start and stop ------------------------------------------------------------------------

    def start(self) -> None:
        """Register (a new epoch), add the local pending work to the store, lease a first batch."""
        reg = self.store.register(self.name)
        self.epoch = reg.epoch
        local = []
        while (item := self.c.scheduler.pop()) is not None:
            local.append(item)
        added = self.store.add_work(WorkItem(item.work_id, encode_item(item)) for item in local)
        (self.c.out.root / STORE_FILE).write_text(json.dumps(
            {"store": self.where, "coordinator": self.name, "epoch": int(self.epoch)}) + "\n")
        log.info("store.joined", store=_safe(self.where), coordinator=self.name, epoch=int(self.epoch),
                 offered=len(local), added=added, voided=reg.voided, lease_s=self.lease_s, batch=self.batch)
        self._refill()
        self.counts = dict(self.store.counts())

    def stop(self) -> None:
        """At the end of the run (after the drain): add what is left, give back every lease."""
        try:
            if self.dead is None and self.epoch is not None:
                self.flush()
                self._push_offers()
                released = self.store.release(self.held.values())
                log.info("store.left", coordinator=self.name, epoch=int(self.epoch), committed=self.committed,
                         refused=dict(self.refused), released=released, leased=self.leased,
                         taken_over=self.taken_over, groups=self.groups)
        except StoreError as exc:
            log.error("store.unavailable", coordinator=self.name, error=str(exc))
        finally:
            self.held.clear()
            self.store.close()

    # --- the commit ----------------------------------------------------------------------------

    def park(self, source: Rank, result: Result) -> bool:
        """A `current` result: park it for the frame's group commit if its item is a store's
        work item (True), else leave it to the local commit (False)."""
        d = self.c.inflight.get(result.token)
        if d is None or d.item is None or d.item.kind is not WorkKind.CORPUS:
            return False
        if result.token in self.parked_tokens:  # the same result twice in one frame
            self._quarantine(source, result, Reason.DUPLICATE, "a second result under a token whose commit"
                                                               " is under way")
            return True
        elapsed = max(self.c.clock() - d.sent_at, 0.0)
        execs = self.c.peers.plausible_execs(result.cost.execs, elapsed)
        lease = self.held.get(d.work_id) or self.lost.get(d.work_id)
        self.parked.append((source, result, lease, execs))
        self.parked_tokens.add(result.token)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(GROUP_WAIT_S, self._flush_later)
        return True

    def _flush_later(self) -> None:
        self._timer = None
        self.flush()
        c = self.c
        if c._maybe_free:
            c._fill(c._maybe_free)
        c._check_finished()
        c._changed.set()

    def flush_due(self) -> None:
        """At the end of a turn: the group commit if enough results are parked (else the timer's)."""
        if len(self.parked) >= self.group:
            self.flush()

    def flush(self) -> None:
        """Commit the parked results in one transaction, then apply the accepted ones locally
        and quarantine the refused ones (nothing of them applied)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.parked:
            return
        parked, self.parked, self.parked_tokens = self.parked, [], set()
        inflight = self.c.inflight
        live = [(s, r, lease, x) for s, r, lease, x in parked if r.token in inflight]
        for source, result, _, _ in parked:
            if result.token not in inflight:  # revoked while parked (its sender was banned)
                self._quarantine(source, result, Reason.STALE, "revoked before its commit")
        sent = [(lease, self._outcome(result, execs)) for _, result, lease, execs in live if lease is not None]
        answers = iter(self._commit_batch(sent) if sent else ())
        settled: list[tuple[Rank, Result, str | None]] = []  # (source, result, why refused or None)
        for source, result, lease, _ in live:
            answer = next(answers) if lease is not None else None
            if answer is not None and answer.committed:
                self.held.pop(lease.work_id, None)  # type: ignore[union-attr]  # (answered: a lease)
                self.committed += 1
                settled.append((source, result, None))
            else:
                why = "no lease held (never leased here)" if answer is None else \
                    answer.reason.value if answer.reason is not None else "store unavailable"
                if lease is not None and self.held.get(lease.work_id) == lease:
                    del self.held[lease.work_id]
                self.lost.pop(result.work_id, None)
                self.refused[why] += 1
                settled.append((source, result, why))
        self.c._apply(self.c.core.store_settled(settled))  # the local apply, after the store's commit
        self._push_offers_safely()
        self._refill_safely()

    def _commit_batch(self, sent: list[tuple[Lease, Outcome]]) -> list[Any]:
        if self.dead is not None:
            return [None] * len(sent)
        self.groups += 1
        try:
            answers = list(self.store.commit_batch(sent))
        except StoreError as exc:
            self.c.fail(exc)
            return [None] * len(sent)
        stale = [a for a in answers if a.reason is RefuseReason.STALE_EPOCH]
        if stale:
            self._epoch_dead(f"the store refused a commit: {RefuseReason.STALE_EPOCH.value}")
        return answers

    def _outcome(self, result: Result, execs: int) -> Outcome:
        """What a result adds to the campaign: its status, the edges of its trace new to this
        coordinator's map (the union grows), its counters."""
        edges: frozenset[int] = frozenset()
        if result.trace:
            try:
                seen = self.c.coverage.seen
                edges = frozenset(e for e in unpack_trace(result.trace) if 0 <= e < len(seen) and not seen[e])
            except ValueError:
                pass  # the verdict counts it (bad_trace)
        return Outcome(status=result.status.value, coverage=edges, counters={"results": 1, "execs": int(execs)})

    def _quarantine(self, source: Rank, result: Result, reason: Reason, detail: str) -> None:
        """Counted and logged like the fence's quarantines, but not scored against the sender:
        a late lease is this coordinator's doing, not the worker's."""
        self.c.stats.quarantined(reason)
        log.warning("result.quarantined", reason=reason.value, source_rank=source, token=result.token[:16],
                    work_id=result.work_id, detail=detail, coordinator=self.name,
                    epoch=None if self.epoch is None else int(self.epoch))

    # --- the ticker ----------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Renew the held leases, add new work, lease more when the local queue runs low."""
        if self.dead is not None or self.epoch is None:
            return
        try:
            if now >= self._next_renew:
                self._next_renew = now + self.lease_s / 3
                self._renew()
            self._push_offers()
            self._refill()
            if now >= self._next_counts:
                self._next_counts = now + COUNTS_EVERY_S
                self.counts = dict(self.store.counts())
        except StaleEpochError as exc:
            self._epoch_dead(str(exc))
        except StoreError as exc:
            self.c.fail(exc)

    def _renew(self) -> None:
        leases = list(self.held.values())
        if not leases:
            return
        kept = {lease.work_id: lease for lease in self.store.renew(leases, self.lease_s)}
        ended = [lease for lease in leases if lease.work_id not in kept]
        self.held.update(kept)
        for lease in ended:
            del self.held[lease.work_id]
            self.lost[lease.work_id] = lease
        if ended:
            log.warning("store.leases_lost", coordinator=self.name, epoch=int(self.epoch or 0), count=len(ended),
                        note="they expired before their renewal (a pause?): their results will be refused")
        # Items that used up dispatch.max_attempts here are done for the campaign too: failed.
        failed = [lease for lease in kept.values()
                  if (w := self.c.journal.work_item(lease.work_id)) is not None and w.state is WorkState.FAILED]
        if failed:
            self._settle(failed, "failed")

    def _settle(self, leases: list[Lease], status: str | None = None) -> None:
        """Commit items this coordinator finished without a result to apply (failed here, or
        done in an earlier run of its journal): `status`, or the journal's (ok or failed)."""
        def status_of(lease: Lease) -> str:
            w = self.c.journal.work_item(lease.work_id)
            return "ok" if w is not None and w.state is WorkState.DONE else "failed"

        sent = [(lease, Outcome(status=status or status_of(lease))) for lease in leases]
        for lease, answer in zip(leases, self._commit_batch(sent), strict=True):
            self.held.pop(lease.work_id, None)
            if answer is not None and answer.committed:
                self.committed += 1

    def _push_offers(self) -> None:
        if self.offers:
            offers, self.offers = self.offers, []
            self.store.add_work(offers)

    def _push_offers_safely(self) -> None:
        try:
            self._push_offers()
        except StoreError as exc:
            self.c.fail(exc)

    def _refill_safely(self) -> None:
        try:
            self._refill()
        except StaleEpochError as exc:
            self._epoch_dead(str(exc))
        except StoreError as exc:
            self.c.fail(exc)

    def _refill(self) -> None:
        """Lease more when the local queue holds less than half a batch."""
        c = self.c
        if self.dead is not None or self.epoch is None or not c.dispatching or c._stop.is_set() \
                or not c.plan.concolic_on:  # (a mutation-only campaign never runs corpus entries)
            return
        queued = len(c.scheduler)
        if queued * 2 >= self.batch:
            return
        grant = self.store.lease(self.name, self.epoch, self.batch - queued, self.lease_s)
        if not grant.leases:
            return
        self.leased += len(grant.leases)
        self.taken_over += grant.taken_over
        if grant.taken_over:
            log.warning("store.taken_over", coordinator=self.name, epoch=int(self.epoch), count=grant.taken_over)
        done: list[Lease] = []
        queued_ids = c.scheduler.queued_ids()
        for lease in grant.leases:
            self.held[lease.work_id] = lease
            self.lost.pop(lease.work_id, None)
            item = decode_item(lease.work_id, lease.payload)
            state = self._local_state(item)
            if state is WorkState.PENDING and item.work_id not in queued_ids:
                c.scheduler.requeue(item)
                c.scheduler.known.add(item.work_id)
            elif state in (WorkState.DONE, WorkState.FAILED):
                done.append(lease)
            # LEASED: in flight here under the lease that expired; its result commits under this one
        if done:
            self._settle(done)
        c._fill(c._maybe_free)

    def _local_state(self, item: LocalItem) -> WorkState:
        """The item's state in this coordinator's journal, adding it (pending) if it is new here."""
        j = self.c.journal
        w = j.work_item(item.work_id)
        if w is None:
            entry = NewEntry(sha256=item.sha256, data=item.data, bound=item.bound, parent=None,
                             origin=item.origin or "shared", new_bits=item.new_bits,
                             found_s=max(self.c.clock() - self.c._t0, 0.0), work_id=item.work_id,
                             target=item.target)
            for e in j.add_seeds([entry]):
                self.c.plan.add_entry(e.target, e.data)
                self.c.targets[e.target].corpus += 1
            self.c.stats.corpus = j.corpus_count()
            w = j.work_item(item.work_id)
            if w is None:
                raise StoreError(f"work item {item.work_id[:16]} of the campaign store names an input this "
                                 f"coordinator holds under another work id: its config (executor, targets,"
                                 f" options) differs from the campaign's")
        return w.state

    # --- what other modules ask ----------------------------------------------------------------

    def offer(self, entry: Any) -> None:
        """A new corpus entry (durable-to-be here): the campaign's work, for any coordinator."""
        self.offers.append(WorkItem(entry.work_id, encode_item(entry)))

    def new_finding(self, kind: str, target: str, identity: str, data: bytes, detail: str, work_id: str) -> bool:
        """Whether a confirmed finding is new to the whole campaign (then recorded as this
        coordinator's); one per (target, crash identity) over all coordinators."""
        if self.dead is not None or self.epoch is None:
            return True  # saved here; the store learns nothing more from a dead epoch
        key = f"{kind}:{target}:{identity}"
        try:
            return bool(self.store.add_findings(self.name, self.epoch, work_id,
                                                [SharedFinding(key, kind, data, detail[:2000])]))
        except StaleEpochError as exc:
            self._epoch_dead(str(exc))
            return True
        except StoreError as exc:
            self.c.fail(exc)
            return True

    def exhausted(self) -> bool:
        """Nothing left anywhere: no item of the campaign pending or leased, nothing held or
        waiting to be added here (a dead epoch has nothing left to do)."""
        if self.dead is not None:
            return True
        if self.held or self.parked or self.offers or not self.counts:
            return False
        return not self.counts.get(ItemState.PENDING, 0) and not self.counts.get(ItemState.LEASED, 0)

    def _epoch_dead(self, why: str) -> None:
        if self.dead is not None:
            return
        self.dead = why
        line = (f"coordinator {self.name}: its epoch {self.epoch} in the campaign store is dead ({why}): another "
                f"process registered under its name; it commits nothing more and stops")
        log.error("store.epoch_dead", coordinator=self.name, epoch=int(self.epoch or 0), detail=why)
        print(f"symfence: {line}", file=sys.stderr, flush=True)
        self.c.fail(StaleEpochError(line))

    def rows(self) -> dict[str, object]:
        """For fuzzer_stats and the summary."""
        return {"store_coordinator": self.name, "store_epoch": int(self.epoch or 0),
                "store_committed": self.committed, "store_refused": sum(self.refused.values()),
                "store_leased": self.leased, "store_taken_over": self.taken_over}


def _safe(where: str) -> str:
    """The store's name without a password (for logs)."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", where)


def store_status_lines(where: str) -> list[str]:
    """`symfence status`'s rows for a shared campaign: one per coordinator, then the items."""
    store = open_store(where, create=False)
    try:
        rows = store.status()
        counts = store.counts()
        findings = len(store.findings())
    finally:
        store.close()
    out = [f"campaign store : {_safe(where)}",
           "items          : " + ", ".join(f"{counts.get(s, 0)} {s.value}" for s in ItemState)
           + f"; {findings} findings (one per crash identity)",
           f"{'coordinator':<24} {'epoch':>6} {'starts':>6} {'holding':>7} {'committed':>9} {'refused':>7} "
           f"{'lost':>5} {'share':>6}"]
    for r in rows:
        out.append(f"{r.coordinator:<24} {r.epoch:>6} {r.registrations:>6} {r.holding:>7} {r.committed:>9} "
                   f"{r.refused:>7} {r.taken_from:>5} {r.share:>6.1%}")
    return out


def store_of(outdir: Path) -> str | None:
    """The store a campaign's output directory used (its STORE_FILE), or None."""
    try:
        return str(json.loads((Path(outdir) / STORE_FILE).read_text())["store"])
    except (OSError, ValueError, KeyError, TypeError):
        return None

