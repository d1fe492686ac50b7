"""AFL-style 64 KiB edge coverage: hit-count buckets, the seen map, and its wire encodings.

A *trace* is the raw coverage of one execution: ``{edge index: hit count}`` with indices in
``0..MAP_SIZE-1`` and counts >= 1. A ``CoverageMap`` remembers, per edge index, the OR of the
AFL count classes (buckets) ever seen there. ``has_new_bits``/``merge`` give AFL's verdict
(0 nothing new, 1 only a new hit-count bucket, 2 a never-seen edge).

Replicas (workers) follow the authoritative map (coordinator) through versioned sparse deltas:
``delta_since(v)`` returns the records a replica at version ``v`` needs and ``apply_delta`` ORs
them in. Every decoder here is strict and raises ``ValueError`` on anything malformed.

Encodings (all little-endian):
- delta / snapshot records: ``u16 index, u8 seen byte`` (3 bytes each, ascending index);
- candidate traces: ``u16 index, u32 count`` (6 bytes each, ascending index, count >= 1);
- snapshot: ``b"SFCM" + u8 format + u64 version`` followed by delta records.
"""

from __future__ import annotations

import struct
from collections import deque
from itertools import compress
from typing import Iterable, Mapping

MAP_SIZE = 65536

VERDICT_NONE = 0
VERDICT_NEW_COUNT = 1
VERDICT_NEW_EDGE = 2

_MAX_COUNT = 0xFFFFFFFF
_HISTORY_LIMIT = 4096  # versions of change history kept for incremental deltas

_DELTA_RECORD = struct.Struct("<HB")
_TRACE_RECORD = struct.Struct("<HI")
_SNAPSHOT_HEADER = struct.Struct("<4sBQ")
_SNAPSHOT_MAGIC = b"SFCM"
_SNAPSHOT_FORMAT = 1


def _bucket_slow(count: int) -> int:
    if count <= 0:
        return 0
    if count <= 2:
        return count
    if count == 3:
        return 4
    if count <= 7:
        return 8
    if count <= 15:
        return 16
    if count <= 31:
        return 32
    if count <= 127:
        return 64
    return 128


_BUCKETS = bytes(_bucket_slow(c) for c in range(128))  # counts >= 128 all map to 128


def bucket(count: int) -> int:
    """AFL's count class of a raw hit count (0, 1, 2, 4, 8, 16, 32, 64 or 128)."""
    if count < 0:
        raise ValueError(f"negative hit count {count}")
    return _BUCKETS[count] if count < 128 else 128


def edges_from_sites(sites: Iterable[int]) -> dict[int, int]:
    """Raw edge hit counts of a sequence of visited locations (AFL: ``(prev >> 1) ^ cur``)."""
    counts: dict[int, int] = {}
    prev = 0
    for cur in sites:
        index = ((prev >> 1) ^ cur) % MAP_SIZE
        counts[index] = counts.get(index, 0) + 1
        prev = cur
    return counts


def pack_trace(trace: Mapping[int, int]) -> bytes:
    """Encode a trace as ``u16 index + u32 count`` records; counts above u32 are clamped."""
    out = bytearray()
    for index in sorted(trace):
        count = trace[index]
        if type(index) is not int or not 0 <= index < MAP_SIZE:
            raise ValueError(f"edge index {index!r} out of range")
        if type(count) is not int or count < 1:
            raise ValueError(f"edge {index}: hit count {count!r} is not a positive int")
        out += _TRACE_RECORD.pack(index, min(count, _MAX_COUNT))
    return bytes(out)


def unpack_trace(packed: bytes) -> dict[int, int]:
    """Decode ``pack_trace`` output; raises ValueError on a bad length, count 0 or a repeat."""
    if type(packed) is not bytes:
        raise ValueError(f"trace must be bytes, not {type(packed).__name__}")
    if len(packed) % _TRACE_RECORD.size:
        raise ValueError(f"trace length {len(packed)} is not a multiple of {_TRACE_RECORD.size}")
    trace: dict[int, int] = {}
    for index, count in _TRACE_RECORD.iter_unpack(packed):
        if count == 0:
            raise ValueError(f"edge {index}: hit count 0")
        if index in trace:
            raise ValueError(f"edge {index} repeated")
        trace[index] = count
    return trace


def _pack_records(seen: bytearray | bytes, indices: Iterable[int]) -> bytes:
    pack = _DELTA_RECORD.pack
    return b"".join([pack(i, seen[i]) for i in sorted(indices)])


_NONZERO = bytes([0] + [1] * 255)  # bytes.translate table: a seen edge -> 1
_SCAN_MAX = 512  # edges up to which the scan below beats numpy (and spares its import, ~0.1 s of CPU)


def _all_records(seen: bytearray) -> bytes:
    """The records of every edge seen, ascending: what `_pack_records(seen, edges_found())` gives.
    The journal saves the map at every flush, and a Python scan of the 64 KiB took ~4 ms of the
    loop thread (~20 us per result at depth 4): a few edges are found by C searches over the map
    turned into 0/1 bytes; more than `_SCAN_MAX` by numpy."""
    pack = _DELTA_RECORD.pack
    find = seen.translate(_NONZERO).find
    records: list[bytes] = []
    i = find(1)
    while i >= 0:
        if len(records) == _SCAN_MAX:
            return _all_records_numpy(seen)
        records.append(pack(i, seen[i]))
        i = find(1, i + 1)
    return b"".join(records)


def _all_records_numpy(seen: bytearray) -> bytes:
    import numpy as np  # here, not at import: only rank 0 snapshots, and only a map this full

    seen_arr = np.frombuffer(seen, dtype=np.uint8)
    edges = np.flatnonzero(seen_arr)
    records = np.empty((len(edges), 3), dtype=np.uint8)  # u16 little-endian index, u8 bits
    records[:, 0] = edges & 0xFF
    records[:, 1] = edges >> 8
    records[:, 2] = seen_arr[edges]
    return records.tobytes()


def _unpack_records(packed: object) -> list[tuple[int, int]]:
    if type(packed) is not bytes:
        raise ValueError(f"coverage delta must be bytes, not {type(packed).__name__}")
    if len(packed) % _DELTA_RECORD.size:
        raise ValueError(f"delta length {len(packed)} is not a multiple of {_DELTA_RECORD.size}")
    records = list(_DELTA_RECORD.iter_unpack(packed))
    indices = set()
    for index, bits in records:
        if bits == 0:
            raise ValueError(f"delta record for edge {index} carries no bits")
        if index in indices:
            raise ValueError(f"delta repeats edge {index}")
        indices.add(index)
    return records


def _check_version(version: object) -> int:
    if type(version) is not int or version < 0:
        raise ValueError(f"coverage version must be a non-negative int, not {version!r}")
    return version


class CoverageMap:
    """The OR of count buckets ever seen per edge, with a version and a bounded change history."""

    __slots__ = ("seen", "version", "_history", "_floor", "_snapshot")

    def __init__(self) -> None:
        self.seen = bytearray(MAP_SIZE)
        self.version = 0
        self._history: deque[tuple[int, tuple[int, ...]]] = deque()  # (version, changed indices)
        self._floor = 0  # deltas can be computed incrementally from any version >= this
        self._snapshot: bytes | None = None  # to_bytes() until the map changes (journal flushes)

    def has_new_bits(self, trace: Mapping[int, int]) -> int:
        """Verdict for a raw trace without recording it: 0, 1 (new bucket) or 2 (new edge)."""
        seen = self.seen
        verdict = VERDICT_NONE
        for index, count in trace.items():
            bits = _BUCKETS[count] if 0 <= count < 128 else bucket(count)
            old = seen[index]
            if bits & ~old:
                if old == 0:
                    return VERDICT_NEW_EDGE
                verdict = VERDICT_NEW_COUNT
        return verdict

    def merge(self, trace: Mapping[int, int]) -> int:
        """Record a raw trace; returns the same verdict as ``has_new_bits`` did before it."""
        seen = self.seen
        verdict = VERDICT_NONE
        changed: list[tuple[int, int]] = []
        for index, count in trace.items():
            bits = _BUCKETS[count] if 0 <= count < 128 else bucket(count)
            old = seen[index]
            if bits & ~old:
                verdict = VERDICT_NEW_EDGE if old == 0 else max(verdict, VERDICT_NEW_COUNT)
                changed.append((index, old | bits))
        if changed:
            for index, bits in changed:
                seen[index] = bits
            self._snapshot = None
            self._record_change(tuple(index for index, _ in changed))
        return verdict

    def edges_found(self) -> list[int]:
        """Indices of every edge seen at least once, ascending."""
        return list(compress(range(MAP_SIZE), self.seen))

    def delta_since(self, version: int) -> tuple[int, bytes]:
        """``(current version, records)`` that bring a replica at ``version`` up to date.

        An unknown version (newer than ours, or older than the kept history) gets a full
        sparse dump, which is always correct because applying a delta only ORs bits in.
        """
        version = _check_version(version)
        if version == self.version:
            return self.version, b""
        if not self._floor <= version < self.version:
            return self.version, _all_records(self.seen)
        indices: set[int] = set()
        for changed_at, changed in reversed(self._history):
            if changed_at <= version:
                break
            indices.update(changed)
        return self.version, _pack_records(self.seen, indices)

    def apply_delta(self, new_version: int, packed: bytes) -> None:
        """OR a peer's delta in and adopt its version. Validates fully before changing anything."""
        new_version = _check_version(new_version)
        records = _unpack_records(packed)
        seen = self.seen
        for index, bits in records:
            seen[index] |= bits
        self._snapshot = None
        self.version = new_version
        self._history.clear()
        self._floor = new_version

    def to_bytes(self) -> bytes:
        """Snapshot (version + sparse seen map) for a journal; history is not kept."""
        if self._snapshot is None:  # every flush saves it: rebuilt only after a change
            header = _SNAPSHOT_HEADER.pack(_SNAPSHOT_MAGIC, _SNAPSHOT_FORMAT, self.version)
            self._snapshot = header + _all_records(self.seen)
        return self._snapshot

    @classmethod
    def from_bytes(cls, snapshot: bytes) -> CoverageMap:
        """Restore a ``to_bytes`` snapshot; raises ValueError if it is malformed."""
        if type(snapshot) is not bytes or len(snapshot) < _SNAPSHOT_HEADER.size:
            raise ValueError("coverage snapshot is not bytes or too short")
        magic, fmt, version = _SNAPSHOT_HEADER.unpack_from(snapshot)
        if magic != _SNAPSHOT_MAGIC or fmt != _SNAPSHOT_FORMAT:
            raise ValueError(f"not a coverage snapshot (magic {magic!r}, format {fmt})")
        cov = cls()
        cov.apply_delta(version, snapshot[_SNAPSHOT_HEADER.size :])
        return cov

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CoverageMap):
            return NotImplemented
        return self.version == other.version and self.seen == other.seen

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"CoverageMap(version={self.version}, edges={MAP_SIZE - self.seen.count(0)})"

    def _record_change(self, changed: tuple[int, ...]) -> None:
        self.version += 1
        self._history.append((self.version, changed))
        if len(self._history) > _HISTORY_LIMIT:
            dropped_version, _ = self._history.popleft()
            self._floor = dropped_version
