"""Symbolic byte/int proxies over z3 bit-vectors, and the recorder of the branches they decide.

A run wraps the input in a ``SymBytes`` (a ``bytes`` subclass holding the concrete input) whose
items are ``SymInt``s. Every proxy carries its exact concrete Python value, so the target always
computes what it would compute on plain bytes; in *symbolic* mode it also carries a 64-bit z3
term over the input variables (byte ``j`` is ``b<j>``, zero-extended; the input length is
``len``) and a bitmask of the variables it depends on (bit 0 = length, bit ``j + 1`` = byte
``j``). In *trace* mode (concrete replays) terms are omitted and only decisions are recorded.

``bool()`` of a proxy is a branch: the active ``Recorder`` notes the site (caller code object +
instruction offset, hashed to 16 bits), the direction taken and, in symbolic mode, the z3
condition, and ``bool()`` returns the concrete truth value. Whether something is a proxy never
depends on its term, so trace and symbolic runs of one input record the same branches.

Concretisation rules (the sound concolic fallback: the concrete value is always the real one,
the engine just stops tracking it; with ``pin_concretised`` the recorder also adds
``term == value`` to the path, else every child is replayed and divergences are counted):
- ``__index__``, ``__int__``, ``__hash__``, ``__float__``, ``__str__``, ``__format__``, int
  methods (``x.bit_length()``), and operations with anything but ints: the concrete int.
- a symbolic index or slice bound into a ``SymBytes``; a symbolic shift amount; ``**``, ``/``.
- any result (or operand) outside the signed 64-bit range becomes a plain int.
- ``SymBytes`` is real ``bytes``: C code (``struct``, ``zlib``, ``re``) and methods not
  overridden here (``find``, ``split``, ``decode``, ...) see the concrete bytes, untracked.
- ``len()`` of a ``SymBytes`` is concrete; the instrumented target's ``len(...)`` calls go
  through ``sym_len`` which returns the symbolic length of the input (or of an in-bounds
  slice), so the search can grow or shrink inputs.
Division and modulo by a symbolic divisor record an implicit branch ``divisor == 0`` at the
caller, so the search also tries a zero divisor (a real ZeroDivisionError in the target).
"""

from __future__ import annotations

import operator
import sys
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import z3

WIDTH = 64
LENGTH_BIT = 1  # dependency bit of the input length; byte j is bit j + 1
_MIN = -(1 << (WIDTH - 1))
_MAX = (1 << (WIDTH - 1)) - 1
_MAX_LOCATIONS = 1 << 20  # coverage locations kept per run (loops saturate buckets anyway)


def _fits(value: int) -> bool:
    return _MIN <= value <= _MAX


# ---------------------------------------------------------------------------------------------
# Branch sites and the recorder


_SITES: dict[tuple[int, int], tuple[int, int, int]] = {}
_CODES: dict[int, object] = {}  # keeps code objects alive so their ids are never reused


def _mix(h: int, direction: int) -> int:
    return (((h * 2 + direction) * 0x9E3779B1) & 0xFFFFFFFF) >> 16


def site_of(frame: Any) -> tuple[int, int, int]:
    """``(site id, location if not taken, location if taken)`` of the frame's current op.

    Stable across processes (module name, qualified name, first line, offset; no ``id``).
    """
    code = frame.f_code
    key = (id(code), frame.f_lasti)
    ids = _SITES.get(key)
    if ids is None:
        module = frame.f_globals.get("__name__", "?")
        text = f"{module}:{code.co_qualname}:{code.co_firstlineno}:{frame.f_lasti}"
        h = zlib.crc32(text.encode())
        ids = ((h ^ (h >> 16)) & 0xFFFF, _mix(h, 0), _mix(h, 1))
        _SITES[key] = ids
        _CODES[id(code)] = code
    return ids


@dataclass(frozen=True)
class Pin:
    """A concretisation recorded as a path constraint (``pin_concretised``)."""

    position: int  # number of branches recorded before it
    constraint: z3.BoolRef
    deps: int
    value: int


class Recorder:
    """Collects one run's branch decisions, coverage locations and (symbolic) conditions."""

    __slots__ = (
        "symbolic", "max_branches", "pin_concretised", "sites", "taken", "conds", "deps",
        "pins", "locations", "capped", "concretisations",
    )

    def __init__(self, *, symbolic: bool, max_branches: int, pin_concretised: bool = False):
        self.symbolic = symbolic
        self.max_branches = max_branches
        self.pin_concretised = pin_concretised
        self.sites: list[int] = []
        self.taken: list[bool] = []
        self.conds: list[z3.BoolRef] = []  # symbolic only: the condition as evaluated
        self.deps: list[int] = []  # symbolic only: variable mask of each condition
        self.pins: list[Pin] = []
        self.locations: list[int] = []
        self.capped = False
        self.concretisations = 0

    def branch(self, frame: Any, taken: bool, proxy: SymInt) -> None:
        site, not_taken_loc, taken_loc = site_of(frame)
        if len(self.locations) < _MAX_LOCATIONS:
            self.locations.append(taken_loc if taken else not_taken_loc)
        if len(self.sites) >= self.max_branches:
            self.capped = True
            return
        self.sites.append(site)
        self.taken.append(taken)
        if self.symbolic:
            self.conds.append(proxy.condition())
            self.deps.append(proxy.deps)

    def concretised(self, proxy: SymInt) -> None:
        self.concretisations += 1
        if self.pin_concretised and self.symbolic and proxy.expr is not None:
            value = int(proxy.value)
            self.pins.append(Pin(len(self.sites), proxy.expr == value, proxy.deps, value))


_active: Recorder | None = None


@contextmanager
def recording(recorder: Recorder) -> Iterator[Recorder]:
    """Make ``recorder`` the one that proxies report to for the duration of the block."""
    global _active
    previous, _active = _active, recorder
    try:
        yield recorder
    finally:
        _active = previous


# ---------------------------------------------------------------------------------------------
# Symbolic integers


def _mod_term(x: Any, y: Any) -> z3.BitVecRef:
    return x % y  # z3's ``%`` on bit-vectors is bvsmod: the sign follows the divisor, like Python


def _floordiv_term(x: Any, y: Any) -> z3.BitVecRef:
    return (x - _mod_term(x, y)) / y  # exact, so signed division's rounding does not matter


def _operand(other: object) -> tuple[int, Any, int] | None:
    """``(value, term or plain int, deps)`` of an int-like operand, else None."""
    if isinstance(other, SymInt):
        return other.value, other.expr, other.deps
    if isinstance(other, int):
        value = int(other)
        return value, value, 0
    return None


class SymInt:
    """An int with a concrete value and (in symbolic mode) a 64-bit z3 term."""

    __slots__ = ("value", "expr", "deps")

    def __init__(self, value: int, expr: z3.BitVecRef | None, deps: int):
        self.value = value
        self.expr = expr
        self.deps = deps

    # -- branches and concretisation --------------------------------------------------------

    def condition(self) -> z3.BoolRef:
        return self.expr != 0

    def __bool__(self) -> bool:
        taken = self.value != 0
        if _active is not None:
            _active.branch(sys._getframe(1), taken, self)
        return taken

    def concrete(self) -> int:
        """The concrete value (a bool for a SymBool), noted as a concretisation."""
        if _active is not None:
            _active.concretised(self)
        return self.value

    def __index__(self) -> int:
        return int(self.concrete())

    __int__ = __index__

    def __hash__(self) -> int:
        return hash(self.concrete())

    def __float__(self) -> float:
        return float(self.concrete())

    def __str__(self) -> str:
        return str(self.concrete())

    def __format__(self, spec: str) -> str:
        return format(self.concrete(), spec)

    def __repr__(self) -> str:
        return repr(self.value)

    def __round__(self, ndigits: int | None = None) -> int:
        return round(self.concrete(), ndigits)

    def __trunc__(self) -> int:
        return int(self.concrete())

    __floor__ = __ceil__ = __trunc__

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.concrete(), name)

    def __reduce__(self) -> tuple[Any, tuple[int]]:
        return int, (int(self.value),)

    # -- arithmetic ---------------------------------------------------------------------------

    def _binary(self, other: object, op: Callable[[Any, Any], Any], term: Callable[[Any, Any], Any],
                reflected: bool = False) -> Any:
        parsed = _operand(other)
        if parsed is None:  # floats, bytes, lists, ...: untracked
            return op(other, self.concrete()) if reflected else op(self.concrete(), other)
        other_value, other_term, other_deps = parsed
        x, y = (other_value, self.value) if reflected else (self.value, other_value)
        value = op(x, y)
        if not (_fits(value) and _fits(other_value)):
            self.concrete()
            if isinstance(other, SymInt):
                other.concrete()
            return value
        if self.expr is None:
            return SymInt(value, None, 0)
        tx, ty = (other_term, self.expr) if reflected else (self.expr, other_term)
        return SymInt(value, term(tx, ty), self.deps | other_deps)

    def __add__(self, o: object) -> Any: return self._binary(o, operator.add, operator.add)
    def __radd__(self, o: object) -> Any: return self._binary(o, operator.add, operator.add, True)
    def __sub__(self, o: object) -> Any: return self._binary(o, operator.sub, operator.sub)
    def __rsub__(self, o: object) -> Any: return self._binary(o, operator.sub, operator.sub, True)
    def __mul__(self, o: object) -> Any: return self._binary(o, operator.mul, operator.mul)
    def __rmul__(self, o: object) -> Any: return self._binary(o, operator.mul, operator.mul, True)
    def __and__(self, o: object) -> Any: return self._binary(o, operator.and_, operator.and_)
    def __rand__(self, o: object) -> Any: return self._binary(o, operator.and_, operator.and_, True)
    def __or__(self, o: object) -> Any: return self._binary(o, operator.or_, operator.or_)
    def __ror__(self, o: object) -> Any: return self._binary(o, operator.or_, operator.or_, True)
    def __xor__(self, o: object) -> Any: return self._binary(o, operator.xor, operator.xor)
    def __rxor__(self, o: object) -> Any: return self._binary(o, operator.xor, operator.xor, True)

    def _divide(self, other: object, op: Callable[[Any, Any], Any], term: Callable[[Any, Any], Any],
                reflected: bool, frame: Any) -> Any:
        divisor = self if reflected else other
        if isinstance(divisor, SymInt) and _active is not None:
            zero_test = divisor == 0
            if isinstance(zero_test, SymBool):
                _active.branch(frame, bool(zero_test.value), zero_test)
        return self._binary(other, op, term, reflected)

    def __floordiv__(self, o: object) -> Any:
        return self._divide(o, operator.floordiv, _floordiv_term, False, sys._getframe(1))

    def __rfloordiv__(self, o: object) -> Any:
        return self._divide(o, operator.floordiv, _floordiv_term, True, sys._getframe(1))

    def __mod__(self, o: object) -> Any:
        return self._divide(o, operator.mod, _mod_term, False, sys._getframe(1))

    def __rmod__(self, o: object) -> Any:
        return self._divide(o, operator.mod, _mod_term, True, sys._getframe(1))

    def __divmod__(self, o: object) -> Any:
        frame = sys._getframe(1)
        quotient = self._divide(o, operator.floordiv, _floordiv_term, False, frame)
        return quotient, self._binary(o, operator.mod, _mod_term)

    def __rdivmod__(self, o: object) -> Any:
        frame = sys._getframe(1)
        quotient = self._divide(o, operator.floordiv, _floordiv_term, True, frame)
        return quotient, self._binary(o, operator.mod, _mod_term, True)

    def __truediv__(self, o: object) -> Any:
        return self.concrete() / (o.concrete() if isinstance(o, SymInt) else o)

    def __rtruediv__(self, o: object) -> Any:
        return o / self.concrete()

    def __pow__(self, o: object, mod: object = None) -> Any:
        exponent = o.concrete() if isinstance(o, SymInt) else o
        return pow(self.concrete(), exponent, mod)

    def __rpow__(self, o: object, mod: object = None) -> Any:
        return pow(o, self.concrete(), mod)

    def _shift(self, other: object, op: Callable[[Any, Any], Any]) -> Any:
        amount = other.concrete() if isinstance(other, SymInt) else other
        if not isinstance(amount, int):
            return op(self.concrete(), amount)
        value = op(self.value, amount)  # raises ValueError for a negative amount, like int
        if not _fits(value):
            self.concrete()
            return value
        if self.expr is None:
            return SymInt(value, None, 0)
        return SymInt(value, op(self.expr, min(int(amount), WIDTH)), self.deps)

    def __lshift__(self, o: object) -> Any: return self._shift(o, operator.lshift)
    def __rshift__(self, o: object) -> Any: return self._shift(o, operator.rshift)  # arithmetic
    def __rlshift__(self, o: object) -> Any: return o << self.concrete()
    def __rrshift__(self, o: object) -> Any: return o >> self.concrete()

    def _unary(self, op: Callable[[Any], Any], term: Callable[[Any], Any]) -> Any:
        value = op(self.value)
        if not _fits(value):
            self.concrete()
            return value
        if self.expr is None:
            return SymInt(value, None, 0)
        return SymInt(value, term(self.expr), self.deps)

    def __neg__(self) -> Any: return self._unary(operator.neg, operator.neg)
    def __invert__(self) -> Any: return self._unary(operator.invert, operator.invert)
    def __pos__(self) -> Any: return self._unary(int, lambda e: e)

    def __abs__(self) -> Any:
        return self._unary(abs, lambda e: z3.If(e < 0, -e, e))

    # -- comparisons --------------------------------------------------------------------------

    def _compare(self, other: object, op: Callable[[Any, Any], bool],
                 term: Callable[[Any, Any], Any]) -> Any:
        parsed = _operand(other)
        if parsed is None or not _fits(parsed[0]):
            return op(self.concrete(), other)
        other_value, other_term, other_deps = parsed
        value = op(self.value, other_value)
        if self.expr is None:
            return SymBool(value, None, 0, None)
        return SymBool(value, None, self.deps | other_deps, term(self.expr, other_term))

    def __eq__(self, o: object) -> Any: return self._compare(o, operator.eq, operator.eq)  # type: ignore[override]
    def __ne__(self, o: object) -> Any: return self._compare(o, operator.ne, operator.ne)  # type: ignore[override]
    def __lt__(self, o: object) -> Any: return self._compare(o, operator.lt, operator.lt)
    def __le__(self, o: object) -> Any: return self._compare(o, operator.le, operator.le)
    def __gt__(self, o: object) -> Any: return self._compare(o, operator.gt, operator.gt)
    def __ge__(self, o: object) -> Any: return self._compare(o, operator.ge, operator.ge)


_ONE = None  # z3 constants, built on first use (z3 terms belong to a context)
_ZERO = None


def _bool_to_int(cond: z3.BoolRef) -> z3.BitVecRef:
    global _ONE, _ZERO
    if _ONE is None:
        _ONE, _ZERO = z3.BitVecVal(1, WIDTH), z3.BitVecVal(0, WIDTH)
    return z3.If(cond, _ONE, _ZERO)


class SymBool(SymInt):
    """The result of a comparison: a symbolic 0/1 int whose ``bool()`` is a branch."""

    __slots__ = ("cond",)

    def __init__(self, value: bool, expr: z3.BitVecRef | None, deps: int,
                 cond: z3.BoolRef | None):
        super().__init__(value, expr, deps)
        self.cond = cond
        if cond is not None and expr is None:
            self.expr = _bool_to_int(cond)

    def condition(self) -> z3.BoolRef:
        return self.cond

    def __bool__(self) -> bool:
        taken = bool(self.value)
        if _active is not None:
            _active.branch(sys._getframe(1), taken, self)
        return taken

    def _logic(self, other: object, op: Callable[[Any, Any], Any],
               term: Callable[[Any, Any], Any]) -> Any:
        if isinstance(other, SymBool):
            value = op(bool(self.value), bool(other.value))
            if self.cond is None:
                return SymBool(value, None, 0, None)
            return SymBool(value, None, self.deps | other.deps, term(self.cond, other.cond))
        if isinstance(other, bool):
            value = op(bool(self.value), other)
            if self.cond is None:
                return SymBool(value, None, 0, None)
            return SymBool(value, None, self.deps, term(self.cond, z3.BoolVal(other)))
        return None

    def __and__(self, o: object) -> Any:
        result = self._logic(o, operator.and_, lambda a, b: z3.And(a, b))
        return super().__and__(o) if result is None else result

    __rand__ = __and__

    def __or__(self, o: object) -> Any:
        result = self._logic(o, operator.or_, lambda a, b: z3.Or(a, b))
        return super().__or__(o) if result is None else result

    __ror__ = __or__

    def __xor__(self, o: object) -> Any:
        result = self._logic(o, operator.xor, lambda a, b: z3.Xor(a, b))
        return super().__xor__(o) if result is None else result

    __rxor__ = __xor__

    def negated(self) -> SymBool:
        if self.cond is None:
            return SymBool(not self.value, None, 0, None)
        return SymBool(not self.value, None, self.deps, z3.Not(self.cond))

    def as_int(self) -> SymInt:
        return SymInt(int(self.value), self.expr, self.deps)


# ---------------------------------------------------------------------------------------------
# Symbolic bytes


def _value(x: Any) -> int:
    return x.value if isinstance(x, SymInt) else x


def _any_true(tests: list[Any], value: bool) -> Any:
    """OR of item-wise tests: plain if decided concretely, else a SymBool over the symbolic ones."""
    symbolic = [t for t in tests if isinstance(t, SymBool)]
    if any(t is True for t in tests) or not symbolic:
        return value
    if symbolic[0].cond is None:
        return SymBool(value, None, 0, None)
    deps = 0
    for t in symbolic:
        deps |= t.deps
    cond = z3.Or(*[t.cond for t in symbolic]) if len(symbolic) > 1 else symbolic[0].cond
    return SymBool(value, None, deps, cond)


def _all_equal(left: list[Any], right: list[Any]) -> Any:
    """``left == right`` item-wise: a plain bool if decided concretely, else a SymBool."""
    pairs = []
    for a, b in zip(left, right):
        if isinstance(a, SymInt) or isinstance(b, SymInt):
            pairs.append((a, b) if isinstance(a, SymInt) else (b, a))
        elif a != b:
            return False
    if not pairs:
        return True
    value = all(a.value == _value(b) for a, b in pairs)
    if pairs[0][0].expr is None:
        return SymBool(value, None, 0, None)
    deps = 0
    conds = []
    for a, b in pairs:
        conds.append(a.expr == (b.expr if isinstance(b, SymInt) else b))
        deps |= a.deps | (b.deps if isinstance(b, SymInt) else 0)
    return SymBool(value, None, deps, z3.And(*conds) if len(conds) > 1 else conds[0])


def _items_of(other: object) -> list[Any] | None:
    if isinstance(other, SymBytes):
        return other._items
    if isinstance(other, (bytes, bytearray, memoryview)):
        return list(bytes(other))
    return None


def _min(a: Any, b: Any) -> Any:
    """``min(a, b)`` for ints and SymInts, symbolic if either is."""
    if not (isinstance(a, SymInt) or isinstance(b, SymInt)):
        return min(a, b)
    value = min(_value(a), _value(b))
    sym = a if isinstance(a, SymInt) else b
    if sym.expr is None:
        return SymInt(value, None, 0)
    ta = a.expr if isinstance(a, SymInt) else a
    tb = b.expr if isinstance(b, SymInt) else b
    deps = (a.deps if isinstance(a, SymInt) else 0) | (b.deps if isinstance(b, SymInt) else 0)
    return SymInt(value, z3.If(ta <= tb, ta, tb), deps)


def _length_of(data: SymBytes) -> Any:
    return data._len if data._len is not None else len(data._items)


class SymBytes(bytes):
    """Real ``bytes`` (the concrete input) whose indexing, iteration and comparisons are symbolic.

    ``len()`` is concrete; ``sym_len`` (used by instrumented targets) gives the tracked length.
    """

    _items: list[Any]
    _len: SymInt | None

    def __new__(cls, concrete: bytes, items: list[Any], length: SymInt | None = None) -> SymBytes:
        obj = super().__new__(cls, concrete)
        obj._items = items
        obj._len = length
        return obj

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return bytes, (bytes(memoryview(self)),)

    def __bytes__(self) -> bytes:
        for item in self._items:
            if isinstance(item, SymInt):
                item.concrete()
        return bytes(memoryview(self))

    def __hash__(self) -> int:
        return hash(self.__bytes__())

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self._slice(key)
        if isinstance(key, SymInt):
            key = key.concrete()
        if not isinstance(key, int):
            return bytes.__getitem__(self, key)  # raises the usual TypeError
        try:
            return self._items[key]
        except IndexError:
            raise IndexError("index out of range") from None

    def _slice(self, key: slice) -> SymBytes:
        start, stop, step = key.start, key.stop, key.step
        c_start = start.concrete() if isinstance(start, SymInt) else start
        c_stop = stop.concrete() if isinstance(stop, SymInt) else stop
        c_step = step.concrete() if isinstance(step, SymInt) else step
        concrete_key = slice(c_start, c_stop, c_step)
        concrete = bytes.__getitem__(self, concrete_key)
        return SymBytes(concrete, self._items[concrete_key],
                        self._slice_length(start, stop, c_start, c_stop, c_step))

    def _slice_length(self, start: Any, stop: Any, c_start: Any, c_stop: Any, c_step: Any) -> Any:
        """Symbolic length ``min(stop, len) - start`` of a forward step-1 slice, else None."""
        if c_step not in (None, 1) or (c_start is not None and c_start < 0):
            return None
        if c_stop is not None and c_stop < 0:
            return None
        length = _length_of(self)
        end = length if c_stop is None else _min(stop, length)
        if c_start is None:
            start = 0
        if _value(start) > _value(end):
            return None
        result = end - start
        return result if isinstance(result, SymInt) else None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        items = _items_of(other)
        if items is None:
            return NotImplemented
        if len(items) != len(self._items):
            return False
        return _all_equal(self._items, items)

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        result = self.__eq__(other)
        if isinstance(result, SymBool):
            return result.negated()
        return result if result is NotImplemented else not result

    def startswith(self, prefix: Any, *bounds: Any) -> Any:  # type: ignore[override]
        if bounds or _items_of(prefix) is None:
            return bytes.startswith(self, prefix, *bounds)
        items = _items_of(prefix)
        if len(items) > len(self._items):
            return False
        return _all_equal(self._items[: len(items)], items)

    def endswith(self, suffix: Any, *bounds: Any) -> Any:  # type: ignore[override]
        if bounds or _items_of(suffix) is None:
            return bytes.endswith(self, suffix, *bounds)
        items = _items_of(suffix)
        if len(items) > len(self._items):
            return False
        return _all_equal(self._items[len(self._items) - len(items):], items)

    def __contains__(self, needle: object) -> Any:
        if not isinstance(needle, (int, SymInt)):
            return bytes.__contains__(self, needle)  # type: ignore[operator]
        value = bytes.__contains__(self, _value(needle))  # ValueError outside range(256)
        return _any_true([_all_equal([item], [needle]) for item in self._items], value)

    def __add__(self, other: Any) -> Any:
        items = _items_of(other)
        if items is None:
            return bytes.__add__(self, other)
        length = _length_of(self) + (_length_of(other) if isinstance(other, SymBytes) else len(items))
        return SymBytes(bytes(memoryview(self)) + bytes(memoryview(other)), self._items + items,
                        length if isinstance(length, SymInt) else None)

    def __radd__(self, other: Any) -> Any:
        items = _items_of(other)
        if items is None:
            return NotImplemented
        length = len(items) + _length_of(self)
        return SymBytes(bytes(memoryview(other)) + bytes(memoryview(self)), items + self._items,
                        length if isinstance(length, SymInt) else None)


@dataclass(frozen=True)
class InputVariables:
    """The z3 variables of one symbolic input: one 8-bit variable per byte and the length."""

    byte_vars: tuple[z3.BitVecRef, ...]
    length: z3.BitVecRef


def make_input(data: bytes, *, symbolic: bool) -> tuple[SymBytes, InputVariables | None]:
    """Wrap ``data`` as the root ``SymBytes`` of a run (with its variables when symbolic)."""
    n = len(data)
    if not symbolic:
        items: list[Any] = [SymInt(b, None, 0) for b in data]
        return SymBytes(data, items, SymInt(n, None, 0)), None
    byte_vars = tuple(z3.BitVec(f"b{j}", 8) for j in range(n))
    items = [SymInt(b, z3.ZeroExt(WIDTH - 8, var), 1 << (j + 1))
             for j, (b, var) in enumerate(zip(data, byte_vars))]
    length = z3.BitVec("len", WIDTH)
    root = SymBytes(data, items, SymInt(n, length, LENGTH_BIT))
    return root, InputVariables(byte_vars, length)


# ---------------------------------------------------------------------------------------------
# Replacements the instrumenter substitutes for builtins in target modules


def sym_len(obj: Any) -> Any:
    """``len(obj)``, symbolic for a ``SymBytes`` whose length is tracked."""
    if isinstance(obj, SymBytes) and obj._len is not None:
        return obj._len
    return len(obj)


def sym_int(*args: Any, **kwargs: Any) -> Any:
    """``int(...)`` that keeps a lone symbolic argument symbolic."""
    if len(args) == 1 and not kwargs and isinstance(args[0], SymInt):
        value = args[0]
        return value.as_int() if isinstance(value, SymBool) else value
    return int(*args, **kwargs)


def sym_from_bytes(data: Any, byteorder: str = "big", *, signed: bool = False) -> Any:
    """``int.from_bytes`` that stays symbolic for symbolic bytes (up to 7 bytes, 8 if signed)."""
    if isinstance(data, SymBytes):
        items = data._items
    elif isinstance(data, (list, tuple)) and any(isinstance(x, SymInt) for x in data):
        items = list(data)
    else:
        return int.from_bytes(data, byteorder, signed=signed)
    plain = bytes(x.value if isinstance(x, SymInt) else x for x in items)  # ValueError if > 255
    value = int.from_bytes(plain, byteorder, signed=signed)
    symbolic = [x for x in items if isinstance(x, SymInt)]
    if not symbolic:
        return value
    bits = 8 * len(items)
    if bits > (WIDTH if signed else WIDTH - 1):
        for x in symbolic:
            x.concrete()
        return value
    if symbolic[0].expr is None:
        return SymInt(value, None, 0)
    parts = [z3.Extract(7, 0, x.expr) if isinstance(x, SymInt) else z3.BitVecVal(x, 8)
             for x in items]
    if byteorder == "little":
        parts.reverse()
    joined = z3.Concat(*parts) if len(parts) > 1 else parts[0]
    extend = z3.SignExt if signed else z3.ZeroExt
    deps = 0
    for x in symbolic:
        deps |= x.deps
    return SymInt(value, extend(WIDTH - bits, joined), deps)
