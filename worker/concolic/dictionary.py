"""Comparison constants from the engine's recorded path constraints, as libFuzzer dictionary tokens.

``comparison_constants(conds)`` walks each recorded branch condition (a z3 Boolean over the input
byte variables ``b0, b1, ...``) and returns the constants the input was compared with, as bytes:

- equalities of single input bytes with constants, joined over consecutive byte indices
  (``data[:4] == b"SYMF"`` is recorded as ``b0 == 83 and b1 == 89 ...``: the token is ``SYMF``);
- a comparison of an expression over k input bytes with a constant (``int.from_bytes(data[5:7],
  "little") == 0xBEEF``): the constant in k bytes, big- and little-endian.

Tokens shorter than two bytes are dropped (the fuzzer finds a single byte on its own). The result
is deduplicated, in first-seen order, capped at ``limit``. Walking z3 terms costs ~1 ms per
condition, so each branch site is walked a few times per process, not on every task.
"""

from __future__ import annotations

import re
from typing import Iterable

import z3

from symfence.protocol.rules import MAX_TOKEN_BYTES

_BYTE_VAR = re.compile(r"b(\d+)\Z")
_COMPARISONS = {
    z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT, z3.Z3_OP_ULT, z3.Z3_OP_ULEQ, z3.Z3_OP_UGT, z3.Z3_OP_UGEQ,
    z3.Z3_OP_SLT, z3.Z3_OP_SLEQ, z3.Z3_OP_SGT, z3.Z3_OP_SGEQ,
}
_MAX_NODES = 4096  # per condition: a deep expression is cut short, not walked for ever


def _byte_vars(expr: z3.ExprRef, budget: list[int]) -> set[int]:
    """Indices of the input byte variables in ``expr``."""
    found: set[int] = set()
    stack, seen = [expr], set()
    while stack and budget[0] > 0:
        e = stack.pop()
        key = e.get_id()
        if key in seen:
            continue
        seen.add(key)
        budget[0] -= 1
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            m = _BYTE_VAR.match(e.decl().name())
            if m:
                found.add(int(m.group(1)))
        else:
            stack.extend(e.children())
    return found


def _constant_tokens(value: int, width: int) -> list[bytes]:
    if value < 0:
        return []
    length = max(width, (value.bit_length() + 7) // 8)
    if length < 2 or length > 8:
        return []
    big = value.to_bytes(length, "big")
    return [big, big[::-1]] if width >= 2 and big != big[::-1] else [big]


_HARVESTS_PER_SITE = 4  # a branch site's constants rarely change: later runs skip it (cost)
_harvested: dict[int, int] = {}  # site -> conditions walked there (per process)


def comparison_constants(conds: Iterable[z3.BoolRef], sites: Iterable[int] | None = None,
                         limit: int = 256) -> tuple[bytes, ...]:
    """Tokens from ``conds``; with ``sites`` (the branch site of each condition), a site already
    walked ``_HARVESTS_PER_SITE`` times in this process is skipped."""
    tokens: dict[bytes, None] = {}
    site_of = iter(sites) if sites is not None else None
    for cond in conds:
        if site_of is not None:
            site = next(site_of, None)
            if _harvested.get(site, 0) >= _HARVESTS_PER_SITE:
                continue
            _harvested[site] = _harvested.get(site, 0) + 1
            if len(_harvested) > 1 << 16:
                _harvested.clear()
        budget = [_MAX_NODES]
        single: dict[int, int] = {}  # byte index -> constant it was compared with (this condition)
        stack, seen = [cond], set()
        while stack and budget[0] > 0:
            e = stack.pop()
            key = e.get_id()
            if key in seen:
                continue
            seen.add(key)
            budget[0] -= 1
            if not z3.is_app(e):
                continue
            if e.decl().kind() in _COMPARISONS and e.num_args() == 2:
                a, b = e.arg(0), e.arg(1)
                if z3.is_bv_value(a):
                    a, b = b, a
                if z3.is_bv_value(b) and not z3.is_bv_value(a):
                    value = b.as_long()
                    indices = _byte_vars(a, budget)
                    if len(indices) == 1 and value < 256:
                        single.setdefault(next(iter(indices)), value)
                    elif indices:
                        for t in _constant_tokens(value, min(len(indices), 8)):
                            tokens.setdefault(t, None)
                    continue
            stack.extend(e.children())
        run: list[int] = []
        for index in sorted(single):
            if run and index != run[-1] + 1:
                _add_run(tokens, run, single)
                run = []
            run.append(index)
        _add_run(tokens, run, single)
        if len(tokens) >= limit:
            break
    return tuple(list(tokens)[:limit])


def _add_run(tokens: dict[bytes, None], run: list[int], single: dict[int, int]) -> None:
    if len(run) >= 2:
        tokens.setdefault(bytes(single[i] for i in run)[:MAX_TOKEN_BYTES], None)
