"""Symbolic integers over z3 bit-vectors, and the decisions they report to the run's active recorder.

A run wraps the input in a ``SymBytes`` (see ``symseq``) whose items are ``SymInt``s.
``SymInt`` is a real ``int`` subclass holding the exact concrete value, so ``isinstance``,
``json.dumps``, ``struct.pack`` and any C code see the number the plain program would see;
in *symbolic* mode it also carries a z3 term over the input variables (byte ``j`` is ``b<j>``,
the input length is ``len``), the term's width (64 bits, wider when a value needs it, e.g.
``int.from_bytes`` of 16 bytes; up to ``MAX_WIDTH``) and a bitmask of the variables it depends
on (bit 0 = length, bit ``j + 1`` = byte ``j``). In *trace* mode (concrete replays) terms are
omitted and only decisions are recorded. Whether something is a proxy never depends on its
term, so trace and symbolic runs of one input record the same branches.

``bool()`` of a proxy is a branch: the active ``Recorder`` (``recorder``; made active by
``recording``) notes the site (caller code object + instruction offset, hashed to 16 bits), the
direction taken and, in symbolic mode, the z3 condition. Models of C code (``seqcore``,
``seqscan``, ``tables``, ``streams``, ``structs``, ...) add *implicit* branches (a scan's
comparison at each position, an index bound, the end of the input) and *assumptions*
(constraints that keep the model exact, never negated).

Concretisation (the sound fallback: the value stays exact, the engine stops tracking it) is
counted per kind in ``Recorder.concretisations``: ``hash``, ``str``, ``float``, ``format``,
``truediv``, ``pow``, ``overflow`` (wider than ``MAX_WIDTH``), ``int.<method>``, and the kinds
the models report (``bytes.<method>``, ``c_<module>.<function>``, ...). C code reading an int
subclass directly cannot be seen; the models and the import hook (``importhook``) cover the
places the input usually leaves through. With ``pin_concretised`` a concretisation also
records ``term == value`` on the path.
Division and modulo by a symbolic divisor record an implicit branch ``divisor == 0``, a shift
by a symbolic amount ``amount < 0``, so the search also tries the exception.

Why this module is over 500 lines: ``SymInt`` must answer every ``int`` operator and method
(each a few lines: concrete value, term, width, dependency mask) so that no operation silently
drops the term; one class, one protocol, kept together.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import z3

from symfence.worker.concolic.recorder import Recorder
from symfence.worker.concolic.z3scope import per_task

WIDTH = 64  # narrowest term; wider when a value needs it
MAX_WIDTH = 1024  # wider results are concretised (kind "overflow")


def bits_of(value: int) -> int:
    """Width of the narrowest two's complement bit-vector holding ``value``."""
    return int(value).bit_length() + 1


def width_for(value: int, *widths: int) -> int:
    """The term width for a result ``value`` of operands of ``widths`` (multiples of 64)."""
    w = max(WIDTH, *widths) if widths else WIDTH
    need = bits_of(value)
    if need > w:
        w = (need + 63) // 64 * 64
    return w


def extend(term: Any, width: int, to: int) -> Any:
    """Sign-extend a term (or leave a plain int) from ``width`` to ``to`` bits."""
    if width >= to or isinstance(term, int):
        return term
    return z3.SignExt(to - width, term)


# ---------------------------------------------------------------------------------------------
# The active recorder (``recorder``) and the decisions proxies report to it


_active: Recorder | None = None


def active() -> Recorder | None:
    """The recorder of the run in progress, if any."""
    return _active


@contextmanager
def recording(recorder: Recorder) -> Iterator[Recorder]:
    """Make ``recorder`` the one that proxies report to for the duration of the block."""
    global _active
    previous, _active = _active, recorder
    try:
        yield recorder
    finally:
        _active = previous


def note_concretised(kind: str, proxy: SymInt | None = None) -> None:
    """Count a concretisation of ``kind`` on the active recorder (if any)."""
    if _active is not None:
        _active.concretised(proxy, kind)


def fix(x: Any, kind: str, frame: Any) -> Any:
    """The concrete value of a SymInt that a model cannot keep symbolic (a seek position, a
    read size, a slice start): counted as a concretisation of ``kind`` and recorded as the
    branch ``x == value`` (taken), so the path stays exact and negating it tries another value."""
    if not isinstance(x, SymInt):
        return x
    if _active is not None:
        _active.concretisations[kind] += 1
        v = x.value
        implicit_branch(frame, True, lambda: (x.term() == v, x.deps) if x.expr is not None else None)
    return x.value


def decide(test: Any, frame: Any) -> bool:
    """The truth of ``test``; a SymBool is recorded as an implicit branch at ``frame``."""
    if isinstance(test, SymBool):
        taken = bool(test.value)
        if _active is not None:
            _active.implicit += 1
            _active.branch(frame, taken, test)
        return taken
    return bool(test)


def implicit_branch(frame: Any, taken: bool, build: Callable[[], tuple[z3.BoolRef, int] | None],
                    end_of_input: int = -1, salt: int = 0) -> bool:
    """Record an implicit branch whose condition ``build()`` makes only when it is kept.

    ``end_of_input`` (the length reached) marks a ``len > n`` branch (see ``Recorder.branch``);
    a non-zero ``salt`` makes another site of the same call site (e.g. per regex pattern).
    """
    rec = _active
    if rec is None:
        return taken
    if rec.wants_conditions:
        made = build()
        if made is None:
            return taken
        cond, deps = made
        test = SymBool(taken, deps, cond)
    else:
        test = SymBool(taken, 0, None)
    rec.implicit += 1
    rec.branch(frame, taken, test, end_of_input, salt)
    return taken


# ---------------------------------------------------------------------------------------------
# Symbolic integers


def _mod_term(x: Any, y: Any) -> z3.BitVecRef:
    return x % y  # z3's ``%`` on bit-vectors is bvsmod: the sign follows the divisor, like Python


def _floordiv_term(x: Any, y: Any) -> z3.BitVecRef:
    return (x - _mod_term(x, y)) / y  # exact, so signed division's rounding does not matter


def operand(other: object) -> tuple[int, Any, int, int] | None:
    """``(value, term or plain int, deps, width)`` of an int-like operand, else None."""
    if isinstance(other, SymInt):
        return other.value, other.term(), other.deps, other.width
    if isinstance(other, int):
        value = int(other)
        return value, value, 0, bits_of(value)
    return None


class SymInt(int):
    """An ``int`` (its concrete value) with, in symbolic mode, a z3 term, its width and deps."""

    def __new__(cls, value: int, expr: Any, deps: int, width: int = WIDTH) -> SymInt:
        obj = int.__new__(cls, value)
        obj.value = int(value)
        obj.expr = expr
        obj.deps = deps
        obj.width = width
        return obj

    def term(self) -> Any:
        return self.expr

    # -- branches and concretisation --------------------------------------------------------

    def condition(self) -> z3.BoolRef:
        return self.term() != 0

    def __bool__(self) -> bool:
        taken = self.value != 0
        if _active is not None:
            _active.branch(sys._getframe(1), taken, self)
        return taken

    def concrete(self, kind: str = "int") -> int:
        """The concrete value, noted as a concretisation of ``kind``."""
        if _active is not None:
            _active.concretised(self, kind)
        return self.value

    def __index__(self) -> int:
        return int(self.concrete("index"))

    def __int__(self) -> int:
        return int(self.concrete("int"))  # the rewritten int() of instrumented modules keeps the term

    def __hash__(self) -> int:
        return hash(self.concrete("hash"))

    def __float__(self) -> float:
        return float(self.concrete("float"))

    def __str__(self) -> str:
        return str(self.concrete("str"))

    def __format__(self, spec: str) -> str:
        return format(self.concrete("format"), spec)

    def __repr__(self) -> str:
        return repr(self.value)

    def __round__(self, ndigits: int | None = None) -> Any:
        if ndigits is None or ndigits >= 0:
            return self
        return round(self.concrete("round"), ndigits)

    def __trunc__(self) -> Any:
        return self

    __floor__ = __ceil__ = __trunc__

    def __reduce__(self) -> tuple[Any, tuple[int]]:
        return type(self.value), (self.value,)

    def __copy__(self) -> SymInt:
        return self

    def __deepcopy__(self, memo: Any) -> SymInt:
        return self

    def to_bytes(self, length: int = 1, byteorder: str = "big", *, signed: bool = False) -> Any:
        from symfence.worker.concolic.models import int_to_bytes

        return int_to_bytes(self, length, byteorder, signed=signed)

    # -- arithmetic ---------------------------------------------------------------------------

    def _binary(self, other: object, op: Callable[[Any, Any], Any], term: Callable[[Any, Any], Any],
                reflected: bool = False) -> Any:
        parsed = operand(other)
        if parsed is None:  # floats, bytes, lists, ...: untracked (an int times a list: fixed)
            kind = f"mixed:{type(other).__name__}"
            mine = fix(self, kind, sys._getframe(2))
            return op(other, mine) if reflected else op(mine, other)
        other_value, other_term, other_deps, other_width = parsed
        x, y = (other_value, self.value) if reflected else (self.value, other_value)
        value = op(x, y)
        if self.expr is None:  # the plain run: no term, its dependency bits still (fdp._count)
            return SymInt(value, None, self.deps | other_deps)
        w = width_for(value, self.width, other_width)
        if w > MAX_WIDTH:
            self.concrete("overflow")
            return value
        mine = extend(self.term(), self.width, w)
        theirs = extend(other_term, other_width, w)
        tx, ty = (theirs, mine) if reflected else (mine, theirs)
        return SymInt(value, term(tx, ty), self.deps | other_deps, w)

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
                _active.implicit += 1
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
        return self.concrete("truediv") / (o.concrete("truediv") if isinstance(o, SymInt) else o)

    def __rtruediv__(self, o: object) -> Any:
        return o / self.concrete("truediv")

    def __pow__(self, o: object, mod: object = None) -> Any:
        exponent = o.concrete("pow") if isinstance(o, SymInt) else o
        return pow(self.concrete("pow"), exponent, mod)

    def __rpow__(self, o: object, mod: object = None) -> Any:
        return pow(o, self.concrete("pow"), mod)

    def __lshift__(self, o: object) -> Any: return shift(self, o, True, sys._getframe(1))
    def __rshift__(self, o: object) -> Any: return shift(self, o, False, sys._getframe(1))
    def __rlshift__(self, o: object) -> Any: return shift(o, self, True, sys._getframe(1))
    def __rrshift__(self, o: object) -> Any: return shift(o, self, False, sys._getframe(1))

    def _unary(self, op: Callable[[Any], Any], term: Callable[[Any], Any]) -> Any:
        value = op(self.value)
        if self.expr is None:
            return SymInt(value, None, self.deps)
        w = width_for(value, self.width)
        if w > MAX_WIDTH:
            self.concrete("overflow")
            return value
        return SymInt(value, term(extend(self.term(), self.width, w)), self.deps, w)

    def __neg__(self) -> Any: return self._unary(operator.neg, operator.neg)
    def __invert__(self) -> Any: return self._unary(operator.invert, operator.invert)
    def __pos__(self) -> Any: return self._unary(int, lambda e: e)

    def __abs__(self) -> Any:
        return self._unary(abs, lambda e: z3.If(e < 0, -e, e))

    # -- comparisons --------------------------------------------------------------------------

    def _compare(self, other: object, op: Callable[[Any, Any], bool],
                 term: Callable[[Any, Any], Any]) -> Any:
        parsed = operand(other)
        if parsed is None:
            if op is operator.eq or op is operator.ne:  # 5 == "5" is just False: no concretisation
                return op(self.value, other)
            return op(self.concrete(f"mixed:{type(other).__name__}"), other)
        other_value, other_term, other_deps, other_width = parsed
        value = op(self.value, other_value)
        if self.expr is None:
            return SymBool(value, 0, None)
        w = max(self.width, other_width, WIDTH)
        if w > MAX_WIDTH:
            self.concrete("overflow")
            return value
        if w % 64:
            w = (w + 63) // 64 * 64
        mine = extend(self.term(), self.width, w)
        theirs = extend(other_term, other_width, w)
        return SymBool(value, self.deps | other_deps, term(mine, theirs))

    def __eq__(self, o: object) -> Any: return self._compare(o, operator.eq, operator.eq)  # type: ignore[override]
    def __ne__(self, o: object) -> Any: return self._compare(o, operator.ne, operator.ne)  # type: ignore[override]
    def __lt__(self, o: object) -> Any: return self._compare(o, operator.lt, operator.lt)
    def __le__(self, o: object) -> Any: return self._compare(o, operator.le, operator.le)
    def __gt__(self, o: object) -> Any: return self._compare(o, operator.gt, operator.gt)
    def __ge__(self, o: object) -> Any: return self._compare(o, operator.ge, operator.ge)


def _count_int_method(name: str) -> Callable[..., Any]:
    method = getattr(int, name)

    def wrapper(self: SymInt, *args: Any, **kwargs: Any) -> Any:
        return method(self.concrete(f"int.{name}"), *args, **kwargs)

    wrapper.__name__ = name
    return wrapper


for _name in ("bit_length", "bit_count", "as_integer_ratio", "conjugate", "is_integer"):
    if hasattr(int, _name):
        setattr(SymInt, _name, _count_int_method(_name))


def shift(a: Any, b: Any, left: bool, frame: Any) -> Any:
    """``a << b`` / ``a >> b`` where either may be a SymInt; a symbolic amount stays symbolic."""
    pa, pb = operand(a), operand(b)
    if pa is None or pb is None:  # e.g. a float: the usual TypeError, or a custom type
        a = a.concrete("shift") if isinstance(a, SymInt) else a
        b = b.concrete("shift") if isinstance(b, SymInt) else b
        return a << b if left else a >> b
    (av, at, ad, aw), (bv, bt, bd, bw) = pa, pb
    if isinstance(b, SymInt):
        implicit_branch(frame, bv < 0, lambda: (bt < 0, bd) if bd else None)
    value = av << bv if left else av >> bv  # ValueError for a negative amount, like int
    if (not isinstance(a, SymInt) or a.expr is None) and (not isinstance(b, SymInt) or b.expr is None):
        return SymInt(value, None, ad | bd)
    w = width_for(value, aw, WIDTH)
    if w > MAX_WIDTH:
        note_concretised("overflow")
        return value
    ta = extend(at, aw, w)
    if isinstance(ta, int):
        ta = z3.BitVecVal(ta, w)
    tb = extend(bt, bw, w)
    if isinstance(tb, int):
        tb = min(tb, w)
    return SymInt(value, ta << tb if left else ta >> tb, ad | bd, w)


_ONE: dict[int, Any] = per_task({})  # z3 constants of the task's context


def _bool_to_int(cond: z3.BoolRef) -> z3.BitVecRef:
    if not _ONE:
        _ONE[0], _ONE[1] = z3.BitVecVal(0, WIDTH), z3.BitVecVal(1, WIDTH)
    return z3.If(cond, _ONE[1], _ONE[0])


class SymBool(SymInt):
    """The result of a comparison: a symbolic 0/1 int whose ``bool()`` is a branch.

    ``repr``/``str`` say ``True``/``False``; pickling gives a bool. (No Python type can
    subclass ``bool``; instrumented modules see ``isinstance(x, bool)`` true for it, and a
    comparison used as a value there is decided on the spot, see ``instrument``.)
    """

    def __new__(cls, value: bool, deps: int, cond: z3.BoolRef | None) -> SymBool:
        obj = int.__new__(cls, bool(value))
        obj.value = bool(value)
        obj.deps = deps
        obj.cond = cond
        obj.width = WIDTH
        obj._expr = None
        return obj

    @property
    def expr(self) -> Any:  # type: ignore[override]
        if self.cond is None:
            return None
        if self._expr is None:
            self._expr = _bool_to_int(self.cond)
        return self._expr

    def term(self) -> Any:
        return self.expr

    def condition(self) -> z3.BoolRef:
        return self.cond

    def __bool__(self) -> bool:
        taken = bool(self.value)
        if _active is not None:
            _active.branch(sys._getframe(1), taken, self)
        return taken

    def __str__(self) -> str:
        return str(self.concrete("str"))

    def _logic(self, other: object, op: Callable[[Any, Any], Any],
               term: Callable[[Any, Any], Any]) -> Any:
        if isinstance(other, SymBool):
            value = op(bool(self.value), bool(other.value))
            if self.cond is None or other.cond is None:
                return SymBool(value, 0, None)
            return SymBool(value, self.deps | other.deps, term(self.cond, other.cond))
        if isinstance(other, bool):
            value = op(bool(self.value), other)
            if self.cond is None:
                return SymBool(value, 0, None)
            return SymBool(value, self.deps, term(self.cond, z3.BoolVal(other)))
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

    def __invert__(self) -> Any:
        return SymInt.__invert__(self)

    def negated(self) -> SymBool:
        if self.cond is None:
            return SymBool(not self.value, 0, None)
        return SymBool(not self.value, self.deps, z3.Not(self.cond))

    def as_int(self) -> SymInt:
        return SymInt(int(self.value), self.expr, self.deps)


def value_of(x: Any) -> Any:
    """The concrete value of a proxy (no concretisation is counted), else ``x``."""
    return x.value if isinstance(x, SymInt) else x


def _joined(symbolic: list[SymBool], value: bool, join: Callable[..., z3.BoolRef]) -> SymBool:
    """One SymBool of ``value`` whose condition joins those of ``symbolic`` (z3.Or or z3.And)."""
    if any(t.cond is None for t in symbolic):
        return SymBool(value, 0, None)
    deps = 0
    for t in symbolic:
        deps |= t.deps
    conds = [t.cond for t in symbolic]
    return SymBool(value, deps, join(*conds) if len(conds) > 1 else conds[0])


def any_true(tests: list[Any], value: bool) -> Any:
    """OR of item-wise tests: plain if decided concretely, else a SymBool over the symbolic ones."""
    symbolic = [t for t in tests if isinstance(t, SymBool)]
    if any(t is True for t in tests) or not symbolic:
        return value
    return _joined(symbolic, value, z3.Or)


def all_true(tests: list[Any], value: bool) -> Any:
    """AND of item-wise tests: False if one is plainly false, plain if decided concretely, else a
    SymBool over the symbolic ones."""
    if any(t is False for t in tests):
        return False
    symbolic = [t for t in tests if isinstance(t, SymBool)]
    if not symbolic:
        return value
    return _joined(symbolic, value, z3.And)


def all_equal(left: list[Any], right: list[Any]) -> Any:
    """``left == right`` item-wise (same length): a plain bool if decided concretely, else a SymBool."""
    pairs = []
    for a, b in zip(left, right):
        if isinstance(a, SymInt) or isinstance(b, SymInt):
            pairs.append((a, b) if isinstance(a, SymInt) else (b, a))
        elif a != b:
            return False
    if not pairs:
        return True
    value = all(a.value == value_of(b) for a, b in pairs)
    if any(a.expr is None or (isinstance(b, SymInt) and b.expr is None) for a, b in pairs):
        return SymBool(value, 0, None)
    deps = 0
    conds = []
    for a, b in pairs:
        test = a == b
        if isinstance(test, SymBool):
            conds.append(test.cond)
            deps |= test.deps
        elif not test:
            return False
    if not conds:
        return True
    return SymBool(value, deps, z3.And(*conds) if len(conds) > 1 else conds[0])


def in_ranges(item: Any, ranges: list[tuple[int, int]], value: bool) -> Any:
    """Whether int-like ``item`` lies in one of the closed ``ranges``: a SymBool if symbolic."""
    if not isinstance(item, SymInt):
        return value
    if item.expr is None:
        return SymBool(value, 0, None)
    t = item.term()
    parts = [t == lo if lo == hi else z3.And(t >= lo, t <= hi) for lo, hi in ranges]
    if not parts:
        return False
    return SymBool(value, item.deps, z3.Or(*parts) if len(parts) > 1 else parts[0])


def ranges_of(values: Any) -> list[tuple[int, int]]:
    """Sorted closed intervals covering a set of ints."""
    out: list[tuple[int, int]] = []
    for v in sorted(set(values)):
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def select(index: Any, terms: list[Any], values: list[int]) -> SymInt:
    """``values[index]`` for a symbolic in-range ``index``, as an If chain over ``terms``."""
    value = values[index.value]
    if index.expr is None:
        return SymInt(value, None, 0)
    n = len(values)
    w = width_for(0, *(bits_of(v) for v in values), *(t.width for t in terms if isinstance(t, SymInt)))
    deps = index.deps
    it = index.term()
    chain: Any = None
    for j in reversed(range(n)):
        t = terms[j]
        if isinstance(t, SymInt):
            deps |= t.deps
            tj = extend(t.term(), t.width, w)
        else:
            tj = z3.BitVecVal(t, w)
        if chain is None:
            chain = tj
        else:
            chain = z3.If(z3.Or(it == j, it == j - n), tj, chain)
    return SymInt(value, chain, deps, w)
