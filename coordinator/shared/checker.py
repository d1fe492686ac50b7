"""The Jepsen-style checker of a campaign store: replays its history and finds what broke the rules.

`check(history, items)` walks the history in store order, keeping each item's current lease and
each coordinator's current epoch, and reports every violation of:

- **at most once**: no item is committed twice, over all coordinators and epochs;
- **the fence**: a commit is made under the item's current lease (same coordinator, epoch and
  token; not ended by an expiry, release or void; before its expiry; its epoch still the
  coordinator's current one), and a lease is granted only on an item nobody holds, by a live
  epoch; a lease is taken over only after it expired;
- **sequences**: each coordinator's epochs strictly increase, each item's lease tokens strictly
  increase, and no epoch or token is issued twice (the history is in store order, which on
  PostgreSQL is the commit order per item and per coordinator, not across them, so tokens of
  different items may appear out of order);
- **conservation**, per coordinator and in sum: leases granted = committed + released + expired
  + voided + outstanding (held now, from the item rows), and the item rows agree with the
  replay (added = pending + leased + done; the done ones are the committed ones).

`main(argv)` is the command line: `python -m symfence.coordinator.shared.checker STORE`.
"""

from __future__ import annotations

import argparse
import enum
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from symfence.coordinator.shared.records import (
    EventKind,
    HistoryEvent,
    ItemRow,
    ItemState,
)


class ViolationKind(str, enum.Enum):
    """What a history did wrong."""

    DOUBLE_COMMIT = "double_commit"  # an item committed a second time
    STALE_COMMIT = "stale_commit"  # a commit under a lease that was not current
    LEASE_WHILE_HELD = "lease_while_held"  # a lease granted on an item held (or done) already
    STALE_LEASE = "stale_lease"  # a lease granted to an epoch that is not its coordinator's current
    EARLY_TAKEOVER = "early_takeover"  # a lease ended as expired before its expiry
    WRONG_END = "wrong_end"  # a renew/release/expire/void naming a lease that was not current
    UNKNOWN_ITEM = "unknown_item"  # an event on an item never added
    EPOCH_ORDER = "epoch_order"  # an epoch not above the coordinator's earlier ones, or issued twice
    TOKEN_ORDER = "token_order"  # a lease token not above the item's earlier ones, or issued twice
    CONSERVATION = "conservation"  # the counts do not add up
    STATE_MISMATCH = "state_mismatch"  # an item's row disagrees with the replayed history


@dataclass(frozen=True)
class Violation:
    """One broken rule: which, at which history row (0: the final state), and the particulars."""

    kind: ViolationKind
    seq: int
    detail: str


@dataclass(frozen=True)
class Conservation:
    """One coordinator's (or the sum's) lease counts: leased = committed + released + expired +
    voided + outstanding. `refused` counts refused commits (none of them applied)."""

    coordinator: str
    leased: int = 0
    committed: int = 0
    released: int = 0
    expired: int = 0
    voided: int = 0
    outstanding: int = 0
    refused: int = 0

    @property
    def balanced(self) -> bool:
        return self.leased == self.committed + self.released + self.expired + self.voided + self.outstanding


@dataclass(frozen=True)
class CheckReport:
    """The checker's verdict: `ok` when there is no violation."""

    violations: tuple[Violation, ...]
    coordinators: tuple[Conservation, ...]
    total: Conservation
    events: int
    items: int
    done: int
    refusals: dict[str, int] = field(default_factory=dict)  # reason -> count

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def complete(self) -> bool:
        """Every item added was committed (exactly once, when `ok`)."""
        return self.done == self.items

    def lines(self) -> list[str]:
        """The report as text: the verdict, the sums, a row per coordinator, the violations."""
        verdict = "ok" if self.ok else f"{len(self.violations)} violation(s)"
        out = [f"checker: {verdict}; {self.events} events, {self.items} items, {self.done} committed, "
               f"refused {dict(sorted(self.refusals.items()))}"]
        for row in (*self.coordinators, self.total):
            out.append(f"  {row.coordinator:<16} leased {row.leased} = committed {row.committed} + released "
                       f"{row.released} + expired {row.expired} + voided {row.voided} + outstanding "
                       f"{row.outstanding}{'' if row.balanced else '  UNBALANCED'}; refused {row.refused}")
        out += [f"  {v.kind.value} at #{v.seq}: {v.detail}" for v in self.violations[:50]]
        if len(self.violations) > 50:
            out.append(f"  ... and {len(self.violations) - 50} more")
        return out


_Key = tuple[str | None, int | None, int | None]  # (coordinator, epoch, token)


@dataclass
class _Item:
    lease: _Key | None = None
    expires: float = 0.0
    commits: int = 0
    last_token: int = 0


_ENDS = {EventKind.RELEASE: "released", EventKind.EXPIRE: "expired", EventKind.VOID: "voided"}


def check(history: Iterable[HistoryEvent], items: Iterable[ItemRow] | None = None) -> CheckReport:
    """Replay `history` (in seq order) and compare it with `items`, the store's rows now (None:
    skip the comparison and count outstanding leases from the replay)."""
    events = sorted(history, key=lambda event: event.seq)
    violations: list[Violation] = []
    state: dict[str, _Item] = {}
    epochs: dict[str, int] = {}  # coordinator -> current epoch
    counts: dict[str, Counter[str]] = {}
    refusals: Counter[str] = Counter()
    issued_epochs: set[int] = set()
    issued_tokens: set[int] = set()

    def bad(kind: ViolationKind, event: HistoryEvent, detail: str) -> None:
        violations.append(Violation(kind, event.seq, f"{event.kind.value} {event.work_id or ''} "
                                                     f"{event.coordinator}/e{event.epoch}/t{event.token}: {detail}"))

    for event in events:
        kind, key = event.kind, (event.coordinator, event.epoch, event.token)
        if kind is EventKind.REGISTER:
            previous = epochs.get(str(event.coordinator), 0)
            if event.epoch is None or event.epoch <= previous or event.epoch in issued_epochs:
                bad(ViolationKind.EPOCH_ORDER, event, f"epoch not above {previous}, or issued before")
            issued_epochs.add(event.epoch or 0)
            epochs[str(event.coordinator)] = event.epoch or 0
            continue
        work_id = str(event.work_id)
        if kind is EventKind.ADD:
            state.setdefault(work_id, _Item())
            continue
        tally = counts.setdefault(str(event.coordinator), Counter())
        if kind is EventKind.REFUSE:  # always safe (nothing applied), whatever it names: counted
            tally["refused"] += 1
            refusals[event.reason] += 1
            continue
        item = state.get(work_id)
        if item is None:
            bad(ViolationKind.UNKNOWN_ITEM, event, "never added")
            item = state[work_id] = _Item()
        current = item.lease == key
        live_epoch = epochs.get(str(event.coordinator)) == event.epoch
        if kind is EventKind.LEASE:
            tally["leased"] += 1
            if event.token is None or event.token <= item.last_token or event.token in issued_tokens:
                bad(ViolationKind.TOKEN_ORDER, event, f"token not above {item.last_token}, or issued before")
            item.last_token = event.token or 0
            issued_tokens.add(item.last_token)
            if item.lease is not None or item.commits:
                bad(ViolationKind.LEASE_WHILE_HELD, event, f"held by {item.lease}, commits {item.commits}")
            if not live_epoch:
                bad(ViolationKind.STALE_LEASE, event, f"current epoch {epochs.get(str(event.coordinator))}")
            item.lease, item.expires = key, event.expires or 0.0
        elif kind is EventKind.RENEW:
            if not current or event.at >= item.expires:
                bad(ViolationKind.WRONG_END, event, f"renewed a lease not current ({item.lease})")
            item.expires = event.expires or 0.0
        elif kind is EventKind.COMMIT:
            tally["committed"] += 1
            if item.commits:
                bad(ViolationKind.DOUBLE_COMMIT, event, f"committed {item.commits} time(s) before")
            if not current or event.at >= item.expires or not live_epoch:
                why = ("the lease was not the current one" if not current else
                       "after its expiry" if event.at >= item.expires else "its epoch was dead")
                bad(ViolationKind.STALE_COMMIT, event, f"{why} (current {item.lease}, expires {item.expires})")
            item.commits += 1
            item.lease = None
        elif kind in _ENDS:
            tally[_ENDS[kind]] += 1
            if not current:
                bad(ViolationKind.WRONG_END, event, f"ended a lease not current ({item.lease})")
            elif kind is EventKind.EXPIRE and event.at < item.expires:
                bad(ViolationKind.EARLY_TAKEOVER, event, f"{item.expires - event.at:.3f} s before its expiry")
            if current:
                item.lease = None

    held: Counter[str] = Counter(str(item.lease[0]) for item in state.values() if item.lease is not None)
    if items is not None:
        rows = {row.work_id: row for row in items}
        held = Counter(str(row.coordinator) for row in rows.values() if row.state is ItemState.LEASED)
        _compare_rows(rows, state, violations)
    per = tuple(
        Conservation(who, tally["leased"], tally["committed"], tally["released"], tally["expired"],
                     tally["voided"], held.get(who, 0), tally["refused"])
        for who, tally in sorted(counts.items())
    )
    per += tuple(Conservation(who, outstanding=n) for who, n in sorted(held.items()) if who not in counts)
    total = Conservation("(all)", *(sum(getattr(row, name) for row in per) for name in
                                    ("leased", "committed", "released", "expired", "voided", "outstanding",
                                     "refused")))
    for row in (*per, total):
        if not row.balanced:
            violations.append(Violation(ViolationKind.CONSERVATION, 0, f"{row.coordinator}: leased {row.leased} "
                                        f"!= {row.committed}+{row.released}+{row.expired}+{row.voided}"
                                        f"+{row.outstanding}"))
    done = sum(1 for item in state.values() if item.commits)
    return CheckReport(tuple(violations), per, total, len(events), len(state), done, dict(refusals))


def _compare_rows(rows: dict[str, ItemRow], state: dict[str, _Item], violations: list[Violation]) -> None:
    """The store's rows against the replay: the same items, the done ones committed, leases alike."""
    for work_id in sorted(set(rows) | set(state)):
        row, item = rows.get(work_id), state.get(work_id)
        if row is None or item is None:
            violations.append(Violation(ViolationKind.STATE_MISMATCH, 0,
                                        f"{work_id}: {'no row' if row is None else 'no ADD in the history'}"))
            continue
        if (row.state is ItemState.DONE) != (item.commits > 0):
            violations.append(Violation(ViolationKind.STATE_MISMATCH, 0,
                                        f"{work_id}: row {row.state.value}, commits in history {item.commits}"))
        elif row.state is ItemState.LEASED and (row.coordinator, row.epoch, row.token) != item.lease:
            violations.append(Violation(ViolationKind.STATE_MISMATCH, 0,
                                        f"{work_id}: row leased to {(row.coordinator, row.epoch, row.token)}, "
                                        f"history {item.lease}"))
        elif row.state is ItemState.PENDING and item.lease is not None:
            violations.append(Violation(ViolationKind.STATE_MISMATCH, 0,
                                        f"{work_id}: row pending, history leased to {item.lease}"))


def main(argv: Sequence[str] | None = None) -> int:
    """Check the store named on the command line; exit 0 when the history is clean, 1 if not."""
    parser = argparse.ArgumentParser(prog="python -m symfence.coordinator.shared.checker",
                                     description="Check a shared campaign store's history (issue 29).")
    parser.add_argument("store", help="a SQLite file, or a PostgreSQL URL / libpq string")
    args = parser.parse_args(argv)
    from symfence.coordinator.shared import open_store
    from symfence.coordinator.shared.interface import StoreError

    try:
        store = open_store(args.store, create=False)
    except StoreError as exc:
        print(f"checker: {exc}", file=sys.stderr)
        return 2
    try:
        report = check(store.history(), store.items())
    finally:
        store.close()
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
