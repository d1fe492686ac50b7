"""The shared store against a model: random sequences of every operation by three coordinators
(registrations and restarts, adds, leases, renewals, releases, commits under current and stale
leases, expiries, the clock moving), on SQLite and PostgreSQL. Each answer is compared with what
a plain in-memory model of the rules says, and the checker runs over the history at the end."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symfence.coordinator.shared import open_store
from symfence.coordinator.shared.checker import check
from symfence.coordinator.shared.interface import StaleEpochError
from symfence.coordinator.shared.records import Epoch, Lease, Outcome, WorkItem, coordinator_id
from tests.pg_support import PgUnavailable, fresh_dsn

NAMES = [coordinator_id(name) for name in ("a", "b", "c")]
TTL = 1.0

# After a fixed start (three coordinators registered, five items), any mix of these; leases,
# commits and the clock come up most often, so that stale and late commits are common.
OPS = st.one_of(
    st.tuples(st.just("lease"), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("commit"), st.integers(0, 30)),
    st.tuples(st.just("advance"), st.sampled_from([0.3, 0.6, 1.1])),
    st.tuples(st.just("commit"), st.integers(0, 30)),
    st.tuples(st.just("lease"), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("renew"), st.integers(0, 30)),
    st.tuples(st.just("release"), st.integers(0, 30)),
    st.tuples(st.just("register"), st.integers(0, 2)),
    st.tuples(st.just("add"), st.integers(0, 7)),
    st.tuples(st.just("expire")),
)


@dataclass
class Model:
    """The rules, plainly: an item is pending, leased to one (coordinator, epoch, token) until
    its expiry, or done; a registration ends the coordinator's older leases."""

    now: float = 1000.0
    epochs: dict[str, int] = field(default_factory=dict)
    # work id -> ("pending",) | ("leased", (coordinator, epoch, token), expires) | ("done",)
    items: dict[str, tuple] = field(default_factory=dict)

    def holds(self, lease: Lease) -> bool:
        state = self.items.get(lease.work_id)
        key = (lease.coordinator, lease.epoch, lease.token)
        return state is not None and state[0] == "leased" and state[1] == key and state[2] > self.now

    def available(self) -> set[str]:
        return {work_id for work_id, state in self.items.items()
                if state[0] == "pending" or (state[0] == "leased" and state[2] <= self.now)}


class Clock:
    def __init__(self, model: Model) -> None:
        self.model = model

    def __call__(self) -> float:
        return self.model.now


def run(where: str, ops: list[tuple]) -> None:
    model = Model()
    clock = Clock(model)
    stores = {name: open_store(where, clock=clock) for name in NAMES}
    grants: list[Lease] = []
    setup = [("register", 0), ("register", 1), ("register", 2), *(("add", k) for k in range(5))]
    try:
        for op in setup + ops:
            kind = op[0]
            if kind == "register":
                name = NAMES[op[1]]
                registration = stores[name].register(name)
                assert registration.epoch > max(model.epochs.values(), default=0)
                voided = 0
                for work_id, state in model.items.items():
                    if state[0] == "leased" and state[1][0] == name:
                        model.items[work_id] = ("pending",)
                        voided += 1
                assert registration.voided == voided
                model.epochs[name] = registration.epoch
            elif kind == "add":
                work_id = f"w{op[1]}"
                assert stores[NAMES[0]].add_work([WorkItem(work_id)]) == (work_id not in model.items)
                model.items.setdefault(work_id, ("pending",))
            elif kind == "lease":
                name, count = NAMES[op[1]], op[2]
                if name not in model.epochs:
                    continue
                available = model.available()
                grant = stores[name].lease(name, model.epochs[name], count, TTL)
                assert len(grant.leases) == min(count, len(available))
                for lease in grant.leases:
                    assert lease.work_id in available
                    model.items[lease.work_id] = ("leased", (name, lease.epoch, lease.token), model.now + TTL)
                grants.extend(grant.leases)
            elif kind in ("commit", "renew", "release") and grants:
                index = op[1] % len(grants)  # any lease granted so far, current or not
                lease = grants[index]
                store = stores[lease.coordinator]
                current = model.holds(lease)
                if kind == "commit":
                    result = store.commit(lease, Outcome(counters={"n": 1}))
                    assert result.committed == current, (lease, model.items.get(lease.work_id), result)
                    if current:
                        model.items[lease.work_id] = ("done",)
                elif kind == "renew":
                    renewed = store.renew([lease], TTL)
                    assert bool(renewed) == current
                    if current:
                        _, key, _ = model.items[lease.work_id]
                        model.items[lease.work_id] = ("leased", key, model.now + TTL)
                        grants[index] = renewed[0]
                else:
                    assert store.release([lease]) == current
                    if current:
                        model.items[lease.work_id] = ("pending",)
            elif kind == "advance":
                model.now += op[1]
            elif kind == "expire":
                expired = {work_id for work_id, state in model.items.items()
                           if state[0] == "leased" and state[2] <= model.now}
                assert stores[NAMES[1]].expire() == len(expired)
                for work_id in expired:
                    model.items[work_id] = ("pending",)
        for name, epoch in model.epochs.items():  # an epoch not the coordinator's current never leases
            with pytest.raises(StaleEpochError):
                stores[name].lease(name, Epoch(epoch - 1), 1, TTL)
        store = stores[NAMES[0]]
        done = sum(1 for state in model.items.values() if state[0] == "done")
        assert store.counters() == ({"n": done} if done else {})
        report = check(store.history(), store.items())
        assert report.ok, "\n".join(report.lines())
        assert report.done == done
    finally:
        for store in stores.values():
            store.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=5, max_size=40))
def test_sqlite_store_follows_the_model(tmp_path_factory, ops) -> None:
    run(str(tmp_path_factory.mktemp("model") / "campaign.sqlite"), ops)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=5, max_size=40))
def test_postgres_store_follows_the_model(ops) -> None:
    try:
        where = fresh_dsn()
    except PgUnavailable as exc:
        pytest.skip(f"PostgreSQL store not tested: {exc}")
    run(where, ops)
