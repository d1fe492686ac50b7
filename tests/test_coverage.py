"""Tests for protocol.coverage: buckets, edges, verdicts, deltas and strict encodings."""

from __future__ import annotations

import ast
import pathlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symfence.protocol.coverage import (
    MAP_SIZE,
    CoverageMap,
    bucket,
    edges_from_sites,
    pack_trace,
    unpack_trace,
)

traces = st.dictionaries(
    st.integers(0, MAP_SIZE - 1), st.integers(1, 300), min_size=0, max_size=40
)


@pytest.mark.parametrize(
    "count, expected",
    [(0, 0), (1, 1), (2, 2), (3, 4), (4, 8), (7, 8), (8, 16), (15, 16), (16, 32), (31, 32),
     (32, 64), (127, 64), (128, 128), (255, 128), (10**12, 128)],
)
def test_bucket_matches_afl_count_classes(count: int, expected: int) -> None:
    assert bucket(count) == expected


def test_bucket_rejects_negative_counts() -> None:
    with pytest.raises(ValueError):
        bucket(-1)


def test_edges_from_sites_uses_afl_formula_and_counts_hits() -> None:
    sites = [10, 20, 10, 20]
    expected_first = (0 >> 1) ^ 10
    expected_second = (10 >> 1) ^ 20
    expected_third = (20 >> 1) ^ 10
    assert edges_from_sites(sites) == {expected_first: 1, expected_second: 2, expected_third: 1}
    assert edges_from_sites([]) == {}
    assert all(0 <= i < MAP_SIZE for i in edges_from_sites([MAP_SIZE * 3 + 5, 70000]))


def test_verdicts_new_edge_then_new_count_then_nothing() -> None:
    cov = CoverageMap()
    assert cov.has_new_bits({5: 1}) == 2
    assert cov.version == 0  # has_new_bits never records
    assert cov.merge({5: 1}) == 2
    assert cov.version == 1
    assert cov.has_new_bits({5: 1}) == 0
    assert cov.merge({5: 3}) == 1  # bucket 4 is new at a known edge
    assert cov.merge({5: 3, 6: 1}) == 2  # a never-seen edge wins over a new bucket
    assert cov.merge({5: 2, 6: 1}) == 1
    assert cov.merge({5: 1, 6: 1}) == 0
    assert cov.version == 4  # only changing merges bump the version
    assert cov.edges_found() == [5, 6]
    assert cov.seen[5] == 1 | 4 | 2


def test_has_new_bits_rejects_negative_counts() -> None:
    with pytest.raises(ValueError):
        CoverageMap().has_new_bits({1: -3})


def test_delta_since_is_incremental_and_unknown_versions_get_full_dump() -> None:
    cov = CoverageMap()
    cov.merge({1: 1})
    cov.merge({2: 1})
    cov.merge({3: 200})
    version, packed = cov.delta_since(1)
    assert version == 3
    assert list(struct.iter_unpack("<HB", packed)) == [(2, 1), (3, 128)]
    assert cov.delta_since(3) == (3, b"")
    _, full = cov.delta_since(99)  # a version we never had
    assert list(struct.iter_unpack("<HB", full)) == [(1, 1), (2, 1), (3, 128)]
    assert cov.delta_since(0)[1] == full


def test_delta_after_history_is_truncated_falls_back_to_full_dump() -> None:
    cov = CoverageMap()
    for i in range(5000):
        cov.merge({i: 1})
    _, packed = cov.delta_since(1)
    assert len(packed) == 3 * 5000
    _, recent = cov.delta_since(4999)
    assert list(struct.iter_unpack("<HB", recent)) == [(4999, 1)]


@pytest.mark.parametrize("bad", [b"\x01\x00", "abc", bytearray(3), None, b"\x01\x00\x00"])
def test_apply_delta_is_strict_and_leaves_map_unchanged(bad: object) -> None:
    cov = CoverageMap()
    cov.merge({7: 1})
    with pytest.raises(ValueError):
        cov.apply_delta(5, bad)  # type: ignore[arg-type]
    assert cov.version == 1 and cov.edges_found() == [7]


def test_apply_delta_rejects_repeated_index_and_bad_version() -> None:
    cov = CoverageMap()
    with pytest.raises(ValueError):
        cov.apply_delta(1, struct.pack("<HBHB", 4, 1, 4, 2))
    with pytest.raises(ValueError):
        cov.apply_delta(-1, b"")
    with pytest.raises(ValueError):
        cov.apply_delta(True, b"")  # type: ignore[arg-type]
    assert cov.edges_found() == []


@settings(max_examples=60, deadline=None)
@given(history=st.lists(traces, min_size=1, max_size=12), data=st.data())
def test_delta_from_version_v_brings_a_copy_at_v_up_to_date(history, data) -> None:
    leader = CoverageMap()
    snapshots = [leader.to_bytes()]
    for trace in history:
        leader.merge(trace)
        snapshots.append(leader.to_bytes())
    replica = CoverageMap.from_bytes(data.draw(st.sampled_from(snapshots)))
    version, packed = leader.delta_since(replica.version)
    replica.apply_delta(version, packed)
    assert replica == leader
    assert replica.edges_found() == leader.edges_found()


@settings(max_examples=60, deadline=None)
@given(history=st.lists(traces, max_size=8), probe=traces)
def test_verdict_matches_a_naive_model(history, probe) -> None:
    cov = CoverageMap()
    model: dict[int, int] = {}
    for trace in history:
        cov.merge(trace)
        for index, count in trace.items():
            model[index] = model.get(index, 0) | bucket(count)
    new_edge = any(model.get(i, 0) == 0 for i in probe)
    new_count = any(bucket(c) & ~model.get(i, 0) for i, c in probe.items())
    expected = 2 if new_edge else 1 if new_count else 0
    assert cov.has_new_bits(probe) == expected
    assert cov.merge(probe) == expected
    assert cov.has_new_bits(probe) == 0


def test_snapshot_round_trip_and_strictness() -> None:
    cov = CoverageMap()
    cov.merge({0: 1, 65535: 40})
    restored = CoverageMap.from_bytes(cov.to_bytes())
    assert restored == cov and restored.seen[65535] == 64
    for bad in (b"", b"XXXX" + cov.to_bytes()[4:], cov.to_bytes()[:-1]):
        with pytest.raises(ValueError):
            CoverageMap.from_bytes(bad)


@given(traces)
def test_trace_round_trip(trace: dict[int, int]) -> None:
    assert unpack_trace(pack_trace(trace)) == trace


def test_pack_trace_clamps_huge_counts_and_rejects_bad_entries() -> None:
    assert unpack_trace(pack_trace({3: 2**40})) == {3: 0xFFFFFFFF}
    for bad in ({MAP_SIZE: 1}, {-1: 1}, {1: 0}, {1: -5}, {1: 1.5}):
        with pytest.raises(ValueError):
            pack_trace(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [b"\x00" * 5, struct.pack("<HI", 1, 0), struct.pack("<HIHI", 1, 1, 1, 2), "x" * 6,
     bytearray(6), memoryview(b"\x00" * 6)],
)
def test_unpack_trace_is_strict(bad: object) -> None:
    with pytest.raises(ValueError):
        unpack_trace(bad)  # type: ignore[arg-type]


def test_coverage_module_stays_pure() -> None:
    source = pathlib.Path(__file__).parents[1] / "protocol" / "coverage.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"mpi4py", "asyncio", "structlog", "uvloop"}


def test_the_fast_snapshot_records_equal_the_record_by_record_packing():
    import random

    from symfence.protocol.coverage import _SCAN_MAX, MAP_SIZE, _all_records, _pack_records

    rng = random.Random(7)  # both ways: the scan (up to _SCAN_MAX edges) and numpy (beyond)
    for n in (0, 1, 300, _SCAN_MAX - 1, _SCAN_MAX, _SCAN_MAX + 1, 5000):
        cov = CoverageMap()
        for _ in range(n):
            cov.seen[rng.randrange(MAP_SIZE)] = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 255])
        cov.seen[MAP_SIZE - 1] = 3 if n else 0  # the highest index: both bytes of the u16
        assert _all_records(cov.seen) == _pack_records(cov.seen, cov.edges_found())
        assert CoverageMap.from_bytes(cov.to_bytes()).seen == cov.seen
