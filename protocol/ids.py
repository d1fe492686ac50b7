"""Typed identifiers: dispatch tokens (one per delivery), work ids (one per thing to execute)."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Callable, Mapping, NewType

import msgpack

DispatchToken = NewType("DispatchToken", str)
WorkId = NewType("WorkId", str)
Rank = NewType("Rank", int)

TOKEN_DOMAIN = b"symcc-dispatch-v1\0"
WORK_DOMAIN = "symfence-work-v1"
EPOCH_BYTES = 32
_HEX64 = re.compile(r"[0-9a-f]{64}")
HEX64_MATCH = _HEX64.fullmatch


def derive_token(epoch: bytes, rank: int, sequence: int) -> DispatchToken:
    """sha256(domain || epoch || rank(8 bytes BE) || sequence(8 bytes BE)) as 64 lowercase hex."""
    if len(epoch) != EPOCH_BYTES:
        raise ValueError(f"epoch must be {EPOCH_BYTES} bytes, got {len(epoch)}")
    if not 0 <= rank < 2**64 or not 0 <= sequence < 2**64:
        raise ValueError("rank and sequence must fit in 8 unsigned bytes")
    digest = hashlib.sha256(
        TOKEN_DOMAIN + epoch + rank.to_bytes(8, "big") + sequence.to_bytes(8, "big")
    )
    return DispatchToken(digest.hexdigest())


def is_valid_token(value: object) -> bool:
    """True for exactly 64 lowercase hex characters (the only token shape ever issued)."""
    return isinstance(value, str) and HEX64_MATCH(value) is not None


class TokenMinter:
    """Issues tokens for one coordinator process: one epoch, a strictly increasing sequence.

    The sequence is never reused; a failed send leaves a hole, which is harmless.
    """

    def __init__(self, epoch: bytes, first_sequence: int = 0) -> None:
        if len(epoch) != EPOCH_BYTES:
            raise ValueError(f"epoch must be {EPOCH_BYTES} bytes, got {len(epoch)}")
        self.epoch = epoch
        self._next = first_sequence

    @property
    def issued(self) -> int:
        return self._next

    def mint(self, rank: int) -> DispatchToken:
        token = derive_token(self.epoch, rank, self._next)
        self._next += 1
        return token


def work_id_for(
    executor: str, target: str, data_sha256: str, bound: int, options: Mapping[str, Any]
) -> WorkId:
    """Hash of the canonical encoding of what to execute. The token is never part of it."""
    canonical = msgpack.packb(
        [WORK_DOMAIN, executor, target, data_sha256, bound, sorted(options.items())],
        use_bin_type=True,
    )
    return WorkId(hashlib.sha256(canonical).hexdigest())


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def work_id_maker(executor: str, target: str, bound: int, options: Mapping[str, Any]) -> Callable[[str], WorkId]:
    """`work_id_for` with everything but the input's sha256 fixed, for many inputs at once
    (seeding): the same ids, with the constant parts of the encoding packed only once (a
    msgpack array is its header followed by its elements' encodings)."""
    head = b"\x96" + b"".join(msgpack.packb(v, use_bin_type=True) for v in (WORK_DOMAIN, executor, target))
    tail = msgpack.packb(bound, use_bin_type=True) + msgpack.packb(sorted(options.items()), use_bin_type=True)
    pack, sha256 = msgpack.packb, hashlib.sha256

    def make(data_sha256: str) -> WorkId:
        return WorkId(sha256(head + pack(data_sha256) + tail).hexdigest())

    return make
