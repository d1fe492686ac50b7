"""Symbolic indexing and membership: a symbolic key into a constant table or dict, and ``in``.

Instrumented code calls ``sym_getitem`` for ``x[k]``, ``sym_get`` for ``x.get(k[, default])``
and ``x.setdefault(...)`` (``sym_method`` for these and ``"".join`` taken as values; a memo,
``d.setdefault(k, k)``, keeps ``k`` symbolic without a branch) and ``sym_contains`` for ``a in b``. A symbolic index into a constant list, tuple, bytes, str
or range stays symbolic (a z3 array select, with the bound as a branch; a table of short
strings: an array select per character, the entry's length a branch); a symbolic key into a
plain dict is an If chain over its keys (membership a branch); ``in`` a constant is a branch
over the members' ranges. Tables longer than ``TABLE_LIMIT`` are indexed concretely (counted).
Derived forms of a table (its values, ranges, z3 array) are cached per object and rebuilt
when a mutable table changes.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import z3

from symfence.worker.concolic.models import PROXY_TYPES
from symfence.worker.concolic.seqcore import _Seq
from symfence.worker.concolic.symbolic import (
    WIDTH,
    SymBool,
    SymInt,
    all_equal,
    any_true,
    decide,
    implicit_branch,
    in_ranges,
    note_concretised,
    ranges_of,
    value_of,
    width_for,
)
from symfence.worker.concolic.symseq import SymBytes, SymStr, sym_join
from symfence.worker.concolic.z3scope import per_task

TABLE_LIMIT = 4096  # longest constant table indexed symbolically (else: a branch on the index)


_CACHE: dict[tuple[int, Any], tuple[Any, Any, Any]] = {}  # -> (container, snapshot, derived)
_CACHE_LIMIT = 4096


def _cached(container: Any, make: Callable[[], Any]) -> Any:
    key = (id(container), make.__code__)  # one entry per container and derivation
    hit = _CACHE.get(key)
    mutable = isinstance(container, (list, set, dict, bytearray))
    if hit is not None and hit[0] is container:
        if not mutable or hit[1] == _snapshot(container):
            return hit[2]
    derived = make()
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[key] = (container, _snapshot(container) if mutable else None, derived)
    return derived


def _snapshot(container: Any) -> Any:
    if isinstance(container, dict):
        return tuple(container.items())
    if isinstance(container, set):
        return frozenset(container)
    return tuple(container)


def _int_values(container: Any) -> list[int] | None:
    if isinstance(container, (bytes, bytearray)):
        return list(container)
    if isinstance(container, range):
        return list(container) if len(container) <= TABLE_LIMIT else None
    if isinstance(container, str):
        return [ord(c) for c in container]
    if all(type(v) is int for v in container):
        return list(container)
    return None


def sym_getitem(container: Any, key: Any) -> Any:
    """``container[key]``; a symbolic key into a constant table or dict stays symbolic."""
    if not isinstance(key, PROXY_TYPES) or isinstance(container, _Seq):
        return container[key]
    frame = sys._getframe(1)
    if isinstance(key, SymInt) and isinstance(container, (list, tuple, bytes, bytearray, str, range)):
        return _table_lookup(container, key, frame)
    if type(container) is dict:
        return _dict_lookup(container, key, frame)
    return container[key]


def sym_get(container: Any, attr: str, *args: Any) -> Any:
    """``container.get(key[, default])`` / ``container.setdefault(key[, default])`` (instrumented
    calls, and the bound methods ``sym_method`` hands out): a symbolic key into a plain dict is
    looked up as ``sym_getitem`` does (its membership a branch), except a memo (``memo``);
    anything else is the object's own method."""
    if (type(container) is dict and attr in _LOOKUPS and 1 <= len(args) <= 2
            and isinstance(args[0], PROXY_TYPES)):
        key, frame = args[0], sys._getframe(1)
        default = args[1] if len(args) == 2 else None
        if default is key:
            return _memo(container, key, attr == "setdefault", frame)
        try:
            return _dict_lookup(container, key, frame)
        except KeyError:
            if attr == "setdefault":
                container[key] = default  # the key itself, as C stores it (its hash is counted)
            return default
    return getattr(container, attr)(*args)


_LOOKUPS = ("get", "setdefault")


def sym_method(obj: Any, attr: str) -> Any:
    """``obj.get`` / ``obj.setdefault`` / ``obj.join`` taken as a value (``memo_get =
    memo.setdefault``, ``_join = "".join``): for a plain dict or a str/bytes separator, the
    modelled method bound to ``obj``; else the object's own attribute."""
    if attr in _LOOKUPS and type(obj) is dict:
        return functools.partial(sym_get, obj, attr)
    if attr == "join" and type(obj) in (str, bytes):
        return functools.partial(sym_join, obj)
    return getattr(obj, attr)


def sym_join_call(obj: Any, *args: Any) -> Any:
    """An instrumented call ``obj.join(parts)``: ``sym_join`` for a str/bytes separator."""
    if len(args) == 1 and isinstance(obj, (str, bytes)):
        return sym_join(obj, args[0])
    return obj.join(*args)


def _plain_key(key: Any) -> Any:
    return key._plain() if isinstance(key, _Seq) else value_of(key)


def _memo(d: dict, key: Any, store: bool, frame: Any) -> Any:
    """``d.setdefault(key, key)`` / ``d.get(key, key)``: the result equals ``key`` unless ``key``
    is one of the entries whose value differs from its key (an alias table), so only those
    entries are branched over; a pure memo (interned keys, json's object keys) keeps the key
    symbolic and records nothing. ``setdefault`` stores a new key under its plain value."""
    plain = _plain_key(key)
    if len(d) > TABLE_LIMIT:
        note_concretised("dict_index")
        return d.setdefault(plain, key) if store else d.get(plain, key)
    aliases = [k for k, v in d.items()
               if type(_plain_key(v)) is not type(_plain_key(k)) or _plain_key(v) != _plain_key(k)]
    if aliases:
        tests = _key_tests(key, aliases)
        hit = plain in aliases
        if any(isinstance(t, SymBool) for t in tests):
            hit = decide(any_true(tests, hit), frame)
        if hit:
            return _dict_lookup(d, key, frame)
    if store and plain not in d:
        d[plain] = key
    return key


def _table_lookup(container: Any, key: SymInt, frame: Any) -> Any:
    n = len(container)
    v = key.value
    inside = implicit_branch(frame, -n <= v < n, lambda: (
        z3.And(key.term() >= -n, key.term() < n), key.deps) if key.expr is not None else None)
    if not inside or n > TABLE_LIMIT:
        if n > TABLE_LIMIT:
            note_concretised("table_index")
        return container[v]
    values = _cached(container, lambda: _int_values(container))
    if values is None:
        texts = _cached(container, lambda: _text_table(container))
        if texts is not None:
            return _text_lookup(container, texts, key, frame)
        # a table of objects: decide the index (negated: another entry)
        implicit_branch(frame, True, lambda: (key.term() == v, key.deps) if key.expr is not None else None)
        return container[v]
    if key.expr is None:
        item = SymInt(values[v], None, 0)
    else:
        array, w = _cached_array(container, values)
        it = key.term()
        index = z3.If(it < 0, it + n, it)
        item = SymInt(values[v], z3.Select(array, index), key.deps, w)
    if isinstance(container, str):
        return SymStr(container[v], [item], None, False)
    return item


_ARRAYS: dict[Any, tuple[Any, Any, int, tuple[int, ...]]] = per_task({})  # z3 arrays: one task's
_TEXT_LIMIT = 16  # longest str/bytes entry of a table modelled item by item


def _text_table(container: Any) -> tuple[type, list[list[int]]] | None:
    """(str or bytes, code units of each entry) of a table of short strings, else None."""
    if isinstance(container, (str, bytes, bytearray, range)) or not container:
        return None
    kind = type(container[0])
    if kind not in (str, bytes):
        return None
    units = []
    for entry in container:
        if type(entry) is not kind or len(entry) > _TEXT_LIMIT:
            return None
        units.append([ord(c) for c in entry] if kind is str else list(entry))
    return kind, units


def _text_lookup(container: Any, texts: tuple[type, list[list[int]]], key: SymInt, frame: Any) -> Any:
    """``TABLE[key]`` for a table of short strings: the entry's length is decided (a branch on
    which entries have it), its characters are array selects over the entries of that length."""
    kind, units = texts
    v = key.value
    length = len(units[v])
    same = [j for j, u in enumerate(units) if len(u) == length]
    n = len(units)
    if len(same) < n:
        ranges = ranges_of(same)
        implicit_branch(frame, True, lambda: (
            (lambda t: (t.cond, t.deps))(in_ranges(SymInt(v, z3.If(key.term() < 0, key.term() + n, key.term()),
                                                          key.deps, key.width), ranges, True))
            if key.expr is not None else None))
    items: list[Any] = []
    for pos in range(length):
        column = [u[pos] if len(u) == length else 0 for u in units]
        if key.expr is None:
            items.append(SymInt(column[v], None, 0))
        else:
            array, w = _cached_array(("text", id(container), length, pos), column)
            it = key.term()
            items.append(SymInt(column[v], z3.Select(array, z3.If(it < 0, it + n, it)), key.deps, w))
    if kind is str:
        return SymStr(container[v], items, None, False)
    return SymBytes(container[v], items, None, False)


def _cached_array(container: Any, values: list[int]) -> tuple[Any, int]:
    key = container if isinstance(container, tuple) and container and container[0] == "text" else id(container)
    hit = _ARRAYS.get(key)
    if hit is not None and (hit[0] is container or hit[0] == container) and hit[3] == tuple(values):
        return hit[1], hit[2]
    w = width_for(0, *(v.bit_length() + 1 for v in values)) if values else WIDTH
    array = z3.K(z3.BitVecSort(WIDTH), z3.BitVecVal(0, w))
    for j, value in enumerate(values):
        array = z3.Store(array, j, value)
    if len(_ARRAYS) >= _CACHE_LIMIT:
        _ARRAYS.clear()
    _ARRAYS[key] = (container, array, w, tuple(values))
    return array, w


def _key_tests(key: Any, candidates: list[Any]) -> list[Any]:
    """``key == k`` for each candidate key (bool or SymBool)."""
    tests = []
    for k in candidates:
        if isinstance(key, SymInt):
            tests.append(key == k if type(k) is int else False)
        elif isinstance(key, _Seq):
            tests.append(key == k if isinstance(k, bytes if isinstance(key, SymBytes) else str) else False)
        else:
            tests.append(False)
    return tests


def _dict_lookup(d: dict, key: Any, frame: Any) -> Any:
    plain = key._plain() if isinstance(key, _Seq) else key.value
    if len(d) > TABLE_LIMIT:
        note_concretised("dict_index")
        return d[plain]
    present = plain in d
    keys = list(d)
    tests = _key_tests(key, keys)
    symbolic = [t for t in tests if isinstance(t, SymBool)]
    if symbolic:
        member = any_true(tests, present)
        decide(member, frame)
    if not present:
        return d[plain]  # KeyError
    values = [d[k] for k in keys]
    if isinstance(key, SymInt) and all(type(v) is int for v in values) and symbolic:
        matching = [(t, v) for t, v in zip(tests, values) if isinstance(t, SymBool) or t is True]
        if key.expr is None or any(isinstance(t, SymBool) and t.cond is None for t, _ in matching):
            return SymInt(d[plain], None, 0)
        w = width_for(0, *(bits_of_int(v) for v in values))
        chain: Any = z3.BitVecVal(d[plain], w)
        deps = key.deps
        for t, v in matching:
            if isinstance(t, SymBool):
                chain = z3.If(t.cond, z3.BitVecVal(v, w), chain)
        return SymInt(d[plain], chain, deps, w)
    if symbolic:
        own = _key_tests(key, [plain])[0]
        if isinstance(own, SymBool):
            decide(own, frame)  # negated: another key
    return d[plain]


def bits_of_int(v: int) -> int:
    return v.bit_length() + 1


def _member_ranges(container: Any, kind: type) -> tuple[list[tuple[int, int]], list[Any]] | None:
    """(ranges of int or one-character members, other members of the needle's kind)."""
    ranges_src: list[int] = []
    others: list[Any] = []
    members = container.keys() if isinstance(container, dict) else container
    for m in members:
        if kind is int and type(m) is int:
            ranges_src.append(m)
        elif kind is str and type(m) is str and len(m) == 1:
            ranges_src.append(ord(m))
        elif kind is bytes and isinstance(m, (bytes, bytearray)) and len(m) == 1:
            ranges_src.append(m[0])
        elif kind is not int and isinstance(m, kind):
            others.append(m)
    return ranges_of(ranges_src), others


def sym_contains(needle: Any, container: Any) -> bool:
    """``needle in container`` (a branch when symbolic); ``not in`` is ``not`` of this."""
    frame = sys._getframe(1)
    if isinstance(container, _Seq):
        if isinstance(container, SymBytes) and isinstance(needle, int):
            value = bytes.__contains__(container, value_of(needle))
            result = any_true([all_equal([item], [needle]) for item in container._items], value)
            return decide(result, frame)
        return container._find(needle, None, None, frame) >= 0
    if not isinstance(needle, PROXY_TYPES):
        return needle in container
    if isinstance(needle, SymInt):
        if isinstance(container, (str,)) or not isinstance(
                container, (bytes, bytearray, set, frozenset, list, tuple, dict, range)):
            return needle in container
        value = value_of(needle) in container
        if isinstance(container, (bytes, bytearray)):
            ranges = _cached(container, lambda: ranges_of(container))
        elif isinstance(container, range) and container.step == 1:
            ranges = [(container.start, container.stop - 1)] if len(container) else []
        else:
            ranges = _cached(container, lambda: _member_ranges(container, int)[0])
        return decide(in_ranges(needle, ranges, value), frame)
    kind = str if isinstance(needle, SymStr) else bytes
    plain = needle._plain()
    if isinstance(container, kind):  # a substring of a constant
        items = needle._items
        k = len(items)
        consts = list(container) if kind is bytes else [ord(c) for c in container]
        if k == 1:
            ranges = _cached(container, lambda: ranges_of(consts))
            return decide(in_ranges(items[0], ranges, plain in container), frame)
        tests = [all_equal(items, consts[p:p + k]) for p in range(len(consts) - k + 1)]
        return decide(any_true(tests, plain in container), frame)
    if isinstance(container, (set, frozenset, list, tuple, dict)):
        value = plain in container
        ranges, others = _cached(container, lambda: _member_ranges(container, kind))
        tests = []
        if len(needle._items) == 1 and ranges:
            tests.append(in_ranges(needle._items[0], ranges, value))
        tests += [needle == m for m in others]
        return decide(any_true(tests, value), frame)
    return plain in container

