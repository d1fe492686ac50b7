"""Models of the builtins the input flows through: the input, ``len``, ``int``, ``int.from_bytes``, ``type``.

Instrumented modules (see ``instrument``) call these instead of the builtins they stand for;
each behaves exactly like the original on plain values and keeps proxies symbolic:
``make_input`` (the root ``SymBytes`` of a run and its z3 variables), ``sym_len`` (the tracked
length), ``sym_int`` (``int(x)``, ``int(str)`` of digits), ``sym_from_bytes`` (any width, a
slice past the end included) and ``int_to_bytes``, ``sym_truth`` (a comparison used as a value
is decided on the spot, so a real ``bool`` flows on), ``sym_isinstance``/``sym_type`` (a
SymBool is a bool). The other places the input leaves Python have their own models: indexing
and ``in`` (``tables``), ``io.BytesIO`` (``streams``), ``struct`` (``structs``), ``re``
(``relib``), ``atheris`` (``fdp``), and the import hook that installs them with counting
wrappers around C modules (``importhook``).
"""
from __future__ import annotations

import io
import sys
from typing import Any

import z3

from symfence.worker.concolic.recorder import LENGTH_BIT
from symfence.worker.concolic.seqcore import _Seq
from symfence.worker.concolic.streams import SymBytesIO, SymStringIO
from symfence.worker.concolic.symbolic import (
    MAX_WIDTH,
    WIDTH,
    SymBool,
    SymInt,
    active,
    decide,
    extend,
    implicit_branch,
    in_ranges,
    note_concretised,
    value_of,
    width_for,
)
from symfence.worker.concolic.symseq import SymBytes, SymStr, sym_join
from symfence.worker.concolic.symview import SymMemoryView

PROXY_TYPES = (SymInt, SymBytes, SymStr)
TABLE_LIMIT = 4096  # longest constant table indexed symbolically (else: a branch on the index)


def is_proxy(x: Any) -> bool:
    return isinstance(x, PROXY_TYPES)


# ---------------------------------------------------------------------------------------------
# The input


class InputVariables:
    """The z3 variables of one symbolic input: one 8-bit variable per byte and the length."""

    __slots__ = ("byte_vars", "length")

    def __init__(self, byte_vars: tuple[z3.BitVecRef, ...], length: z3.BitVecRef):
        self.byte_vars = byte_vars
        self.length = length


_ANY_BYTE = 1 << 1  # the plain run's dependency bit of every input byte (byte 0's, symbolically)


def make_input(data: bytes, *, symbolic: bool) -> tuple[SymBytes, InputVariables | None]:
    """Wrap ``data`` as the root ``SymBytes`` of a run (with its variables when symbolic)."""
    n = len(data)
    if not symbolic:  # no terms; whether a value depends on bytes or on the length only, still: a
        # FuzzedDataProvider count read from bytes is then fixed (a branch) in this run as in the
        # symbolic one (fdp._count). One bit for every byte: a bit per byte made the run's
        # arithmetic work on ints as wide as the input (a 4 KiB input: 4,097-bit masks).
        items: list[Any] = [SymInt(b, None, _ANY_BYTE) for b in data]
        root = SymBytes(data, items, SymInt(n, None, LENGTH_BIT), True)
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
    if isinstance(obj, SymMemoryView):  # bytes underneath, a memoryview to the program
        classes = cls if isinstance(cls, tuple) else (cls,)
        return any(isinstance(c, type) and issubclass(memoryview, c) for c in classes)
    if cls is sym_int:  # the name ``int`` picked as a converter (``instrument``) is still the type
        cls = int
    elif isinstance(cls, tuple) and sym_int in cls:
        cls = tuple(int if c is sym_int else c for c in cls)
    if isinstance(obj, SymBool) and (cls is bool or (isinstance(cls, tuple) and bool in cls)):
        return True
    return isinstance(obj, cls)


# The plain type each proxy stands for: what ``type(x)`` and ``x.__class__`` name in rewritten code.
_PLAIN_TYPES: dict[type, type] = {SymInt: int, SymBool: bool, SymBytes: bytes, SymStr: str,
                                  SymMemoryView: memoryview, SymBytesIO: io.BytesIO, SymStringIO: io.StringIO}


def sym_class(x: Any) -> Any:
    """``x.__class__``: a proxy's plain type, as ``type(x)`` (olefile's ``c.__class__ is int``
    took a SymInt for a sequence: a false finding); anything else's own ``__class__``."""
    return _PLAIN_TYPES.get(type(x)) or x.__class__


def sym_type(*args: Any) -> Any:
    """``type(x)`` naming the plain type of a proxy (``type(name, bases, ns)`` unchanged)."""
    if len(args) == 1:
        t = type(args[0])
        return _PLAIN_TYPES.get(t, t)
    return type(*args)


def sym_bytes(*args: Any, **kwargs: Any) -> Any:
    """``bytes(...)`` in rewritten code: of symbolic bytes (a view, a ``bytes`` subclass) the same
    items, as ``bytes(b)`` of plain bytes is ``b`` itself; ``bytes(text, encoding)`` of a SymStr
    its ``encode``. ``bytes(self._stream.read(n))`` (asn1, on every field) made the input plain:
    10 engine branches where 1,068 were there to find."""
    if len(args) == 1 and not kwargs and isinstance(args[0], SymBytes):
        data = args[0]
        return data if type(data) is SymBytes else data._copy_as(SymBytes)
    if args and isinstance(args[0], SymStr) and (len(args) > 1 or kwargs):
        return args[0].encode(*args[1:], **kwargs)
    return bytes(*args, **kwargs)


def sym_str(*args: Any, **kwargs: Any) -> Any:
    """``str(...)`` in rewritten code: ``str(data, encoding)`` of symbolic bytes is their
    ``decode`` (C decoded a plain copy); anything else is ``str``'s own (symbolic text's
    ``__str__`` keeps it symbolic)."""
    if args and isinstance(args[0], SymBytes) and (len(args) > 1 or kwargs):
        return args[0].decode(*args[1:], **kwargs)
    return str(*args, **kwargs)


_CONVERSIONS = {ord("s"): str, ord("r"): repr, ord("a"): ascii}


def sym_fstring(*parts: Any) -> Any:
    """An f-string of rewritten code: ``f"{a}:{b!r:>4}"`` arrives as its constant texts and, for
    each field, ``(value, conversion, spec)``. CPython joins the formatted fields in C (a plain
    str even of symbolic parts); joined here, symbolic text stays symbolic (``format`` of a
    SymStr with no spec is the SymStr itself)."""
    texts = []
    for part in parts:
        if type(part) is tuple:
            value, conversion, spec = part
            if conversion in _CONVERSIONS:
                value = _CONVERSIONS[conversion](value)
            part = format(value, spec)
        texts.append(part)
    return sym_join("", texts)


def sym_bytearray(*args: Any, **kwargs: Any) -> Any:
    """``bytearray(...)``: a plain, mutable copy (no symbolic bytearray yet), counted when the
    bytes were symbolic, so the engine's report names where the input went plain."""
    if args and isinstance(args[0], (SymBytes, SymStr)):
        note_concretised("bytearray.copy")
    return bytearray(*args, **kwargs)


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
            note_concretised("int.parse")
        return value
    digits, sign = items, 1
    first = value_of(items[0])
    if first in (0x2B, 0x2D):  # + -
        rec = active()
        if rec is not None and isinstance(items[0], SymInt) and items[0].expr is not None:
            rec.assume(items[0].term() == first, items[0].deps)
        digits, sign = items[1:], (-1 if first == 0x2D else 1)
    if not digits or any(not any(lo <= value_of(x) <= hi for lo, hi in ranges) for x in digits):
        note_concretised("int.parse")  # whitespace, underscores, prefixes: not modelled
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
        deps = 0
        for x in symbolic:
            deps |= x.deps
        return SymInt(value, None, deps)
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
