"""Models of the places the input leaves Python: builtins, tables, ``io.BytesIO``, ``struct``, C modules.

Instrumented modules (see ``instrument``) call these instead of the builtins they stand for;
each behaves exactly like the original on plain values and keeps proxies symbolic:
``sym_len`` (the tracked length), ``sym_int`` (``int(x)``, ``int(str)``), ``sym_from_bytes``
(any width), ``sym_getitem`` (a symbolic index into a constant list, tuple, bytes, str or
dict: an If chain or a z3 array, with the bound as a branch), ``sym_contains`` (``in``),
``sym_truth`` (a comparison used as a value is decided on the spot, so a real ``bool`` flows
on), ``sym_isinstance``/``sym_type`` (a SymBool is a bool), and the import hook that hands
instrumented code ``SymBytesIO`` for ``io.BytesIO``, the ``struct`` model, and counting
wrappers around the functions of C modules (``c_<module>.<function>``) and ``re``, and
``atheris`` with the Python ``FuzzedDataProvider`` of ``fdp``.

Why this module is over 500 lines: it is the list of every place the input leaves Python that
the engine models (builtins, tables, BytesIO, struct, C modules); each model is short and
independent, and the import hook that installs them needs them in one place.
"""

from __future__ import annotations

import builtins
import io
import struct as _struct
import sys
import types
from typing import Any, Callable, Iterator

import z3

from symfence.worker.concolic.symbolic import (
    LENGTH_BIT,
    MAX_WIDTH,
    WIDTH,
    SymBool,
    SymInt,
    active,
    all_equal,
    any_true,
    decide,
    fix,
    implicit_branch,
    in_ranges,
    note_concretised,
    ranges_of,
    extend,
    select,
    value_of,
    width_for,
)
from symfence.worker.concolic.symseq import SymBytes, SymStr, _Seq, sym_chr, sym_ord

_PROXIES = (SymInt, SymBytes, SymStr)
_TABLE_LIMIT = 4096  # longest constant table indexed symbolically (else: a branch on the index)


def is_proxy(x: Any) -> bool:
    return isinstance(x, _PROXIES)


# ---------------------------------------------------------------------------------------------
# The input


class InputVariables:
    """The z3 variables of one symbolic input: one 8-bit variable per byte and the length."""

    __slots__ = ("byte_vars", "length")

    def __init__(self, byte_vars: tuple[z3.BitVecRef, ...], length: z3.BitVecRef):
        self.byte_vars = byte_vars
        self.length = length


def make_input(data: bytes, *, symbolic: bool) -> tuple[SymBytes, InputVariables | None]:
    """Wrap ``data`` as the root ``SymBytes`` of a run (with its variables when symbolic)."""
    n = len(data)
    if not symbolic:
        items: list[Any] = [SymInt(b, None, 0) for b in data]
        root = SymBytes(data, items, SymInt(n, None, 0), True)
        root._base = 0
        return root, None
    byte_vars = tuple(z3.BitVec(f"b{j}", 8) for j in range(n))
    items = [SymInt(b, z3.ZeroExt(WIDTH - 8, var), 1 << (j + 1))
             for j, (b, var) in enumerate(zip(data, byte_vars))]
    length = z3.BitVec("len", WIDTH)
    root = SymBytes(data, items, SymInt(n, length, LENGTH_BIT), True)
    root._base = 0
    return root, InputVariables(byte_vars, length)


# ---------------------------------------------------------------------------------------------
# Builtins


def sym_len(obj: Any) -> Any:
    """``len(obj)``, symbolic for a SymBytes/SymStr whose length is tracked."""
    if isinstance(obj, _Seq) and obj._len is not None:
        return obj._len
    return len(obj)


def sym_truth(x: Any) -> Any:
    """A comparison used as a value: a SymBool is decided here (a branch) and becomes a bool."""
    if isinstance(x, SymBool):
        return decide(x, sys._getframe(1))
    return x


def sym_isinstance(obj: Any, cls: Any) -> bool:
    if isinstance(obj, SymBool) and (cls is bool or (isinstance(cls, tuple) and bool in cls)):
        return True
    return isinstance(obj, cls)


_PLAIN_TYPES = {SymInt: int, SymBool: bool}


def sym_type(*args: Any) -> Any:
    """``type(x)`` naming the plain type of a proxy (``type(name, bases, ns)`` unchanged)."""
    if len(args) == 1:
        t = type(args[0])
        if t in _PLAIN_TYPES:
            return _PLAIN_TYPES[t]
        if t is SymBytes:
            return bytes
        if t is SymStr:
            return str
        if t is SymBytesIO:
            return io.BytesIO
        if t is SymStringIO:
            return io.StringIO
        return t
    return type(*args)


_DIGITS = {10: [(0x30, 0x39)],
           16: [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
           8: [(0x30, 0x37)], 2: [(0x30, 0x31)]}


def sym_int(*args: Any, **kwargs: Any) -> Any:
    """``int(...)``: a lone SymInt stays itself; ``int(text[, base])`` of a SymStr/SymBytes of digits stays symbolic."""
    if len(args) == 1 and not kwargs and isinstance(args[0], SymInt):
        value = args[0]
        return value.as_int() if isinstance(value, SymBool) else value
    if args and isinstance(args[0], _Seq):
        base = kwargs.get("base", args[1] if len(args) > 1 else 10)
        return _int_of_text(args[0], value_of(base), sys._getframe(1), args, kwargs)
    return int(*args, **kwargs)


def _int_of_text(text: _Seq, base: int, frame: Any, args: tuple, kwargs: dict) -> Any:
    plain_args = (text._plain(),) + tuple(value_of(a) for a in args[1:])
    value = int(*plain_args, **kwargs)  # the real ValueError for a bad literal
    items = text._items
    ranges = _DIGITS.get(base)
    if ranges is None or not items or not any(isinstance(x, SymInt) for x in items):
        if any(isinstance(x, SymInt) for x in items):
            note_concretised("int(str)")
        return value
    digits, sign = items, 1
    first = value_of(items[0])
    if first in (0x2B, 0x2D):  # + -
        rec = active()
        if rec is not None and isinstance(items[0], SymInt) and items[0].expr is not None:
            rec.assume(items[0].term() == first, items[0].deps)
        digits, sign = items[1:], (-1 if first == 0x2D else 1)
    if not digits or any(not any(lo <= value_of(x) <= hi for lo, hi in ranges) for x in digits):
        note_concretised("int(str)")  # whitespace, underscores, prefixes: not modelled
        return value
    symbolic = False
    for x in digits:  # each digit stays a digit on this path (negated: the ValueError path)
        if isinstance(x, SymInt):
            implicit_branch(frame, True, lambda x=x: _digit_cond(x, ranges))
            symbolic = symbolic or x.expr is not None
    if not symbolic:
        return SymInt(value, None, 0)
    w = width_for(base ** len(digits) * 2)
    if w > MAX_WIDTH:
        note_concretised("overflow")
        return value
    total: Any = z3.BitVecVal(0, w)
    deps = 0
    for x in digits:
        if isinstance(x, SymInt) and x.expr is not None:
            t = z3.SignExt(w - x.width, x.term()) if w > x.width else x.term()
            if base == 16:
                d = z3.If(t <= 0x39, t - 0x30, z3.If(t >= 0x61, t - 0x57, t - 0x37))
            else:
                d = t - 0x30
            deps |= x.deps
        else:
            d = z3.BitVecVal(int(chr(value_of(x)), base), w)
        total = total * base + d
    return SymInt(value, total if sign > 0 else -total, deps, w)


def _digit_cond(x: SymInt, ranges: list[tuple[int, int]]) -> tuple[z3.BoolRef, int] | None:
    if x.expr is None:
        return None
    test = in_ranges(x, ranges, True)
    return (test.cond, test.deps) if isinstance(test, SymBool) and test.cond is not None else None


def sym_from_bytes(data: Any, byteorder: str = "big", *, signed: bool = False) -> Any:
    """``int.from_bytes`` that stays symbolic for symbolic bytes of any width (up to MAX_WIDTH)."""
    if isinstance(data, SymBytes):
        items = data._items
        grown = _from_grown_slice(data, byteorder, signed)
        if grown is not None:
            return grown
    elif isinstance(data, (list, tuple)) and any(isinstance(x, SymInt) for x in data):
        items = list(data)
    else:
        return int.from_bytes(data, byteorder, signed=signed)
    return from_items(items, byteorder, signed)


def _from_grown_slice(data: SymBytes, byteorder: str, signed: bool) -> Any:
    """``int.from_bytes`` of a slice past the end (``data[:16]`` of a short input): an If chain
    over the slice's possible lengths, the missing bytes being those of a longer input."""
    cap, length = data._cap, data._len
    n = len(data._items)
    if cap is None or cap <= n or cap > 64 or not isinstance(length, SymInt) or length.expr is None:
        return None
    phantoms = data._phantoms(n, cap - n)
    if phantoms is None:
        return None
    current = from_items(data._items, byteorder, signed)
    if isinstance(current, SymInt) and current.expr is None:
        return None
    if isinstance(current, SymInt):
        w = width_for(0, 8 * cap + 1, current.width)
        chain = extend(current.term(), current.width, w)
        deps = current.deps | length.deps
    else:
        w = width_for(current, 8 * cap + 1)
        chain, deps = z3.BitVecVal(current, w), length.deps
    lt = length.term()
    for k in range(n + 1, cap + 1):
        longer = from_items(data._items + phantoms[: k - n], byteorder, signed)
        if isinstance(longer, SymInt) and longer.expr is not None:
            chain = z3.If(lt == k, extend(longer.term(), longer.width, w), chain)
            deps |= longer.deps
    return SymInt(value_of(current), chain, deps, w)


def from_items(items: list[Any], byteorder: str, signed: bool) -> Any:
    plain = bytes(value_of(x) for x in items)  # ValueError if > 255
    value = int.from_bytes(plain, byteorder, signed=signed)
    symbolic = [x for x in items if isinstance(x, SymInt)]
    if not symbolic:
        return value
    bits = 8 * len(items)
    w = width_for(value, bits + (0 if signed else 1))
    if w > MAX_WIDTH:
        note_concretised("overflow")
        return value
    if any(x.expr is None for x in symbolic):
        return SymInt(value, None, 0)
    parts = [z3.Extract(7, 0, x.term()) if isinstance(x, SymInt) else z3.BitVecVal(x, 8)
             for x in items]
    if byteorder == "little":
        parts.reverse()
    joined = z3.Concat(*parts) if len(parts) > 1 else parts[0]
    ext = z3.SignExt if signed else z3.ZeroExt
    deps = 0
    for x in symbolic:
        deps |= x.deps
    return SymInt(value, ext(w - bits, joined) if w > bits else joined, deps, w)


def int_to_bytes(x: SymInt, length: Any = 1, byteorder: str = "big", *, signed: bool = False) -> Any:
    """``x.to_bytes(...)`` giving a SymBytes whose items are the term's bytes."""
    length = value_of(length)
    plain = int.to_bytes(x.value, length, byteorder, signed=signed)  # the real OverflowError
    if x.expr is None:
        return SymBytes(plain, [SymInt(b, None, 0) for b in plain], None, False)
    w = max(x.width, 8 * length)
    t = z3.SignExt(w - x.width, x.term()) if w > x.width else x.term()
    items = [SymInt(b, z3.ZeroExt(WIDTH - 8, z3.Extract(8 * i + 7, 8 * i, t)), x.deps)
             for i, b in enumerate(reversed(plain))]
    if byteorder == "big":
        items.reverse()
    return SymBytes(plain, items, None, False)


# ---------------------------------------------------------------------------------------------
# Tables and membership


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
        return list(container) if len(container) <= _TABLE_LIMIT else None
    if isinstance(container, str):
        return [ord(c) for c in container]
    if all(type(v) is int for v in container):
        return list(container)
    return None


def sym_getitem(container: Any, key: Any) -> Any:
    """``container[key]``; a symbolic key into a constant table or dict stays symbolic."""
    if not isinstance(key, _PROXIES) or isinstance(container, _Seq):
        return container[key]
    frame = sys._getframe(1)
    if isinstance(key, SymInt) and isinstance(container, (list, tuple, bytes, bytearray, str, range)):
        return _table_lookup(container, key, frame)
    if type(container) is dict:
        return _dict_lookup(container, key, frame)
    return container[key]


def sym_get(container: Any, attr: str, *args: Any) -> Any:
    """``container.get(key[, default])`` (instrumented ``x.get(...)`` calls): a symbolic key into
    a plain dict is looked up as ``sym_getitem`` does (its membership a branch); anything else
    is the object's own ``get``."""
    if type(container) is dict and 1 <= len(args) <= 2 and isinstance(args[0], _PROXIES):
        try:
            return _dict_lookup(container, args[0], sys._getframe(1))
        except KeyError:
            return args[1] if len(args) == 2 else None
    return getattr(container, attr)(*args)


def _table_lookup(container: Any, key: SymInt, frame: Any) -> Any:
    n = len(container)
    v = key.value
    inside = implicit_branch(frame, -n <= v < n, lambda: (
        z3.And(key.term() >= -n, key.term() < n), key.deps) if key.expr is not None else None)
    if not inside or n > _TABLE_LIMIT:
        if n > _TABLE_LIMIT:
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


_ARRAYS: dict[int, tuple[Any, Any, int]] = {}
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
            tests.append(key == k if isinstance(k, type(key).__mro__[2]) else False)
        else:
            tests.append(False)
    return tests


def _dict_lookup(d: dict, key: Any, frame: Any) -> Any:
    plain = key._plain() if isinstance(key, _Seq) else key.value
    if len(d) > _TABLE_LIMIT:
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
    if not isinstance(needle, _PROXIES):
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


# ---------------------------------------------------------------------------------------------
# io.BytesIO


class _SymStream:
    """Reads of an in-memory stream over a SymBytes/SymStr return symbolic slices (a mixin)."""

    _sym: Any
    _kind = "stream"

    def _plain_now(self, kind: str) -> None:
        if self._sym is not None:
            note_concretised(f"{self._kind}.{kind}")
            self._sym = None

    def read(self, size: Any = -1) -> Any:
        if self._sym is None:
            return super().read(size)  # type: ignore[misc]
        frame = sys._getframe(1)
        size = fix(size, f"{self._kind}.read_size", frame)
        start = super().tell()  # type: ignore[misc]
        super().read(size)  # type: ignore[misc]
        if size is None or size < 0:
            return self._sym._slice(slice(start, None), frame)
        return self._sym._slice(slice(start, start + size), frame)

    read1 = read

    def readline(self, size: Any = -1) -> Any:
        if self._sym is None:
            return super().readline(size)  # type: ignore[misc]
        frame = sys._getframe(1)
        size = fix(size, f"{self._kind}.read_size", frame)
        start = super().tell()  # type: ignore[misc]
        line = super().readline(size)  # type: ignore[misc]
        items = self._sym._items
        n = len(items)
        if start >= n:
            return line
        limit = n if size is None or size < 0 else min(n, start + size)
        p = start
        while p < limit:  # the scan for the newline, one comparison per character
            p += 1
            if decide(all_equal([items[p - 1]], [10]), frame):
                break
        else:
            if limit == n:
                self._sym._end_branch(frame, n)
        return self._sym._slice(slice(start, p if p < n else None), frame)

    def readlines(self, hint: Any = -1) -> list[Any]:
        lines = []
        total = 0
        while True:
            line = self.readline()
            if not line:
                return lines
            lines.append(line)
            total += len(line)
            if hint is not None and 0 < value_of(hint) <= total:
                return lines

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def getvalue(self) -> Any:
        if self._sym is None:
            return super().getvalue()  # type: ignore[misc]
        return self._sym

    def seek(self, pos: Any, whence: int = 0) -> int:
        pos = fix(pos, f"{self._kind}.seek", sys._getframe(1))
        if self._sym is not None and whence == 2 and isinstance(pos, int) and pos < 0:
            # seeking back from the end needs that many bytes: the length decides (ValueError if not)
            length = self._sym._len
            if isinstance(length, SymInt):
                implicit_branch(sys._getframe(1), length.value + pos >= 0, lambda: (
                    length.term() + pos >= 0, length.deps) if length.expr is not None else None)
        return super().seek(pos, whence)  # type: ignore[misc]

    def write(self, b: Any) -> int:
        self._plain_now("write")
        return super().write(b)  # type: ignore[misc]

    def writelines(self, lines: Any) -> None:
        self._plain_now("write")
        return super().writelines(lines)  # type: ignore[misc]

    def truncate(self, size: Any = None) -> int:
        self._plain_now("truncate")
        return super().truncate(size)  # type: ignore[misc]


class SymBytesIO(_SymStream, io.BytesIO):
    """``io.BytesIO`` over a SymBytes: reads return symbolic slices; writing makes it plain."""

    _kind = "BytesIO"

    def __init__(self, initial_bytes: Any = b"") -> None:
        super().__init__(initial_bytes)
        self._sym: SymBytes | None = initial_bytes if isinstance(initial_bytes, SymBytes) else None

    def readinto(self, b: Any) -> int:
        if self._sym is not None:
            note_concretised("BytesIO.readinto")
        return super().readinto(b)

    def getbuffer(self) -> Any:
        self._plain_now("getbuffer")
        return super().getbuffer()


class SymStringIO(_SymStream, io.StringIO):
    """``io.StringIO`` over a SymStr (newline="\\n", the default: no translation)."""

    _kind = "StringIO"

    def __init__(self, initial_value: Any = "", newline: Any = "\n") -> None:
        super().__init__(initial_value, newline)
        self._sym: SymStr | None = None
        if isinstance(initial_value, SymStr):
            if newline == "\n":
                self._sym = initial_value
            else:
                note_concretised("StringIO.newline")


# ---------------------------------------------------------------------------------------------
# struct


_INT_CODES = set("bBhHiIlLqQnN")
_ORDERS = {"<": "little", ">": "big", "!": "big", "=": sys.byteorder, "@": sys.byteorder}


def _layout(fmt: Any) -> tuple[str, list[tuple[str, int, int]]]:
    """(byte order, [(code, offset, size)]) of a format; 's' fields carry their length."""
    text = fmt.decode("ascii") if isinstance(fmt, bytes) else fmt
    text = "".join(text.split())
    order = text[0] if text and text[0] in _ORDERS else "@"
    body = text[1:] if text and text[0] in "<>!=@" else text
    prefix = text[0] if text and text[0] in "<>!=@" else ""
    fields: list[tuple[str, int, int]] = []
    done = prefix
    count = ""
    for ch in body:
        if ch.isdigit():
            count += ch
            continue
        repeat = int(count) if count else 1
        count = ""
        if ch in "sp":
            end = _struct.calcsize(done + f"{repeat}{ch}")
            fields.append((ch, end - repeat, repeat))
            done += f"{repeat}{ch}"
            continue
        for _ in range(repeat):
            end = _struct.calcsize(done + ch)
            size = _struct.calcsize(prefix + ch) if prefix else _struct.calcsize("@" + ch)
            if ch != "x":
                fields.append((ch, end - size, size))
            done += ch
    return _ORDERS[order], fields


def _unpack_items(fmt: Any, items: list[Any], concrete: tuple[Any, ...]) -> tuple[Any, ...]:
    byteorder, fields = _layout(fmt)
    out: list[Any] = []
    for (code, offset, size), value in zip(fields, concrete):
        chunk = items[offset:offset + size]
        if not any(isinstance(x, SymInt) for x in chunk):
            out.append(value)
        elif code in _INT_CODES:
            out.append(from_items(chunk, byteorder, code.islower()))
        elif code == "?":
            tests = [x != 0 for x in chunk]
            test = any_true(tests, value)
            out.append(test if isinstance(test, SymBool) else value)
        elif code in "sc":
            out.append(SymBytes(value, list(chunk), None, False))
        else:
            note_concretised(f"struct.{code}")
            out.append(value)
    return tuple(out)


def _plain_buffer(buffer: Any) -> Any:
    return buffer._plain() if isinstance(buffer, SymBytes) else buffer


def _length_is(buffer: SymBytes, size: int, exact: bool, offset: int, frame: Any) -> None:
    length = buffer._len
    if not isinstance(length, SymInt):
        return
    taken = (length.value == offset + size) if exact else (length.value >= offset + size)
    implicit_branch(frame, taken, lambda: (
        (length.term() == offset + size) if exact else (length.term() >= offset + size),
        length.deps) if length.expr is not None else None)


def unpack(fmt: Any, buffer: Any) -> tuple[Any, ...]:
    """``struct.unpack`` whose integer, bool and bytes fields of a SymBytes stay symbolic."""
    if isinstance(buffer, SymBytes):  # the length check first: a short buffer's struct.error is a path too
        _length_is(buffer, _struct.calcsize(fmt), True, 0, sys._getframe(1))
    concrete = _struct.unpack(fmt, _plain_buffer(buffer))
    if not isinstance(buffer, SymBytes):
        return concrete
    return _unpack_items(fmt, buffer._items, concrete)


def unpack_from(fmt: Any, buffer: Any, offset: Any = 0) -> tuple[Any, ...]:
    offset = fix(offset, "struct.offset", sys._getframe(1))
    size = _struct.calcsize(fmt)
    if isinstance(buffer, SymBytes) and offset >= 0:
        _length_is(buffer, size, False, offset, sys._getframe(1))
    concrete = _struct.unpack_from(fmt, _plain_buffer(buffer), offset)
    if not isinstance(buffer, SymBytes) or offset < 0:
        return concrete
    return _unpack_items(fmt, buffer._items[offset:offset + size], concrete)


def iter_unpack(fmt: Any, buffer: Any) -> Iterator[tuple[Any, ...]]:
    concrete = list(_struct.iter_unpack(fmt, _plain_buffer(buffer)))
    if not isinstance(buffer, SymBytes):
        yield from concrete
        return
    size = _struct.calcsize(fmt)
    for i, values in enumerate(concrete):
        yield _unpack_items(fmt, buffer._items[i * size:(i + 1) * size], values)


class Struct(_struct.Struct):
    """``struct.Struct`` with the symbolic ``unpack``, ``unpack_from`` and ``iter_unpack``."""

    def unpack(self, buffer: Any) -> tuple[Any, ...]:
        if isinstance(buffer, SymBytes):
            _length_is(buffer, self.size, True, 0, sys._getframe(1))
        concrete = super().unpack(_plain_buffer(buffer))
        if not isinstance(buffer, SymBytes):
            return concrete
        return _unpack_items(self.format, buffer._items, concrete)

    def unpack_from(self, buffer: Any, offset: Any = 0) -> tuple[Any, ...]:
        offset = fix(offset, "struct.offset", sys._getframe(1))
        if isinstance(buffer, SymBytes) and offset >= 0:
            _length_is(buffer, self.size, False, offset, sys._getframe(1))
        concrete = super().unpack_from(_plain_buffer(buffer), offset)
        if not isinstance(buffer, SymBytes) or offset < 0:
            return concrete
        return _unpack_items(self.format, buffer._items[offset:offset + self.size], concrete)

    def iter_unpack(self, buffer: Any) -> Iterator[tuple[Any, ...]]:
        return iter_unpack(self.format, buffer)


# ---------------------------------------------------------------------------------------------
# C modules seen from instrumented code


def _counting(fn: Callable[..., Any], kind: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if any(isinstance(a, _PROXIES) for a in args) or any(
                isinstance(v, _PROXIES) for v in kwargs.values()):
            note_concretised(kind)
        return fn(*args, **kwargs)

    wrapper.__name__ = getattr(fn, "__name__", kind)
    wrapper.__qualname__ = wrapper.__name__
    wrapper.__doc__ = getattr(fn, "__doc__", None)
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


_NEVER_MODEL = {"sys", "builtins", "gc", "_imp", "marshal", "_thread", "_weakref", "_io",
                "itertools", "_functools", "_collections", "_abc", "posix", "nt", "_signal",
                "faulthandler", "_warnings", "atexit", "errno", "time", "_operator"}
_models: dict[str, types.ModuleType | None] = {}
# C accelerators of pure-Python stdlib code: an instrumented module importing them gets a model
# without these names, so ``from _json import scanstring`` fails and it runs (and the engine
# follows) its Python fallback, as it does on an interpreter without the C module.
_ACCELERATORS = {"_json": ("scanstring", "make_scanner")}


def _copy_module(module: types.ModuleType) -> types.ModuleType:
    copy = types.ModuleType(module.__name__, module.__doc__)
    copy.__dict__.update(module.__dict__)
    return copy


def _is_c_module(name: str, module: types.ModuleType) -> bool:
    if name in _NEVER_MODEL or name.startswith("symfence"):
        return False
    path = getattr(module, "__file__", None)
    return path is None or str(path).endswith((".so", ".pyd"))


def model_module(name: str) -> types.ModuleType | None:
    """The model an instrumented module gets for ``import name`` (None: the real module)."""
    if name in _models:
        return _models[name]
    model: types.ModuleType | None = None
    module = sys.modules.get(name)
    if name == "io" and module is not None:
        model = _copy_module(module)
        model.BytesIO, model.StringIO = SymBytesIO, SymStringIO  # type: ignore[attr-defined]
    elif name == "struct" and module is not None:
        model = _copy_module(module)
        model.unpack, model.unpack_from = unpack, unpack_from  # type: ignore[attr-defined]
        model.iter_unpack, model.Struct = iter_unpack, Struct  # type: ignore[attr-defined]
        model.pack = _counting(_struct.pack, "c_struct.pack")  # type: ignore[attr-defined]
    elif name == "re" and module is not None:
        from symfence.worker.concolic.relib import re_model  # relib uses this module's helpers

        model = re_model(module, _copy_module)
    elif name == "atheris" and module is not None:
        model = _atheris_model(module)
    elif name in _ACCELERATORS and module is not None:
        model = _copy_module(module)  # without its C fast paths: the module falls back to its Python code
        for attr in _ACCELERATORS[name]:
            model.__dict__.pop(attr, None)
    elif module is not None and _is_c_module(name, module):
        model = _copy_module(module)
        for attr, value in module.__dict__.items():
            if isinstance(value, types.BuiltinFunctionType) and not attr.startswith("_"):
                setattr(model, attr, _counting(value, f"c_{name}.{attr}"))
    _models[name] = model
    return model


def _atheris_model(module: types.ModuleType) -> types.ModuleType:
    """``atheris`` as the engine runs a harness: the Python FuzzedDataProvider (``fdp``), and
    the libFuzzer-only calls as no-ops (``atheris_compat``)."""
    from symfence.worker.atheris_compat import NO_OPS
    from symfence.worker.concolic.fdp import FuzzedDataProvider

    model = _copy_module(module)
    model.FuzzedDataProvider = FuzzedDataProvider  # type: ignore[attr-defined]
    for attr, fn in NO_OPS.items():
        setattr(model, attr, fn)
    return model


_real_import = builtins.__import__


def _absolute(name: str, globals: Any, level: int) -> str | None:
    if level == 0:
        return name
    package = (globals or {}).get("__package__") or ""
    parts = package.rsplit(".", level - 1)
    if len(parts) < level:
        return None
    base = parts[0]
    return f"{base}.{name}" if name else base


def make_import(rewritten: dict[str, types.ModuleType]) -> Callable[..., Any]:
    """The ``__import__`` of the modules of one instrumented load: its rewritten copies (``rewritten``,
    name -> module, filled by ``instrument``), so an import run later inside a function finds the
    rewritten module rather than the plain one back in sys.modules; models for io, struct, re and
    C modules."""

    def sym_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                   level: int = 0) -> Any:
        if rewritten:
            absolute = _absolute(name, globals, level)
            copy = rewritten.get(absolute) if absolute else None
            if copy is not None:
                if fromlist:
                    return copy
                top = rewritten.get(absolute.partition(".")[0]) if level == 0 else copy
                if top is not None:
                    return top
        module = _real_import(name, globals, locals, fromlist, level)
        if level != 0 or (not fromlist and "." in name):
            return module
        model = model_module(name)
        return module if model is None else model

    return sym_import


def _counting_builtin(name: str) -> Callable[..., Any]:
    return _counting(getattr(builtins, name), f"builtin.{name}")


def instrumented_builtins(rewritten: dict[str, types.ModuleType]) -> dict[str, Any]:
    """The ``__builtins__`` of an instrumented module of the load whose copies are ``rewritten``."""
    table = dict(builtins.__dict__)
    table.update({
        "__import__": make_import(rewritten), "len": sym_len, "ord": sym_ord, "chr": sym_chr,
        "isinstance": sym_isinstance,
    })
    for name in ("hex", "oct", "bin", "format", "ascii"):
        table[name] = _counting_builtin(name)
    return table
