"""The bulk helpers seeding uses (issue 13: start-up that does not grow with the corpus) give
exactly what their one-at-a-time versions give."""


from symfence.coordinator.afl import AflState
from symfence.coordinator.scheduler import Scheduler, WorkItem
from symfence.protocol.ids import sha256_hex, work_id_for, work_id_maker


def test_work_id_maker_equals_work_id_for():
    for options in ({}, {"task_ms": 0.0, "distribution": "fixed", "nested": [1, 2], "s": "x" * 40}):
        for target in ("", "synthetic", "examples.tlv:target" * 20):
            for bound in (0, 5, 300):
                make = work_id_maker("synthetic", target, bound, options)
                for data in (b"", b"abc", bytes(1000)):
                    sha = sha256_hex(data)
                    assert make(sha) == work_id_for("synthetic", target, sha, bound, options)


def test_scheduler_extend_orders_and_dedupes_like_add():
    items = [WorkItem(f"{i % 7:064x}", bytes(i % 5), "s", "t", bound=i % 3, new_bits=i % 2, seed=i % 4 == 0,
                      origin="seed" if i % 4 == 0 else "concolic") for i in range(40)]
    one, bulk = Scheduler(), Scheduler()
    for item in items[:10]:
        one.add(item)
        bulk.add(item)
    added = [one.add(item) for item in items[10:]]
    assert bulk.extend(items[10:]) == sum(added)
    assert len(one) == len(bulk) and one.known == bulk.known
    assert [one.pop() for _ in range(len(one))] == [bulk.pop() for _ in range(len(bulk))]


def test_afl_seeds_is_entry_for_each_seed():
    a, b = AflState(), AflState()
    for q in range(5):
        a.entry(q, None, 123.0, seed=True)
    b.seeds(range(5))
    assert a.depth_of == b.depth_of and a.max_depth == b.max_depth and a.last_find == b.last_find == 0
