"""The core of symbolic ``bytes`` and ``str``: items, tracked length, end of input, indexing, comparison.

``_Seq`` is the base of ``SymBytes`` and ``SymStr`` (``symseq``): a list of items (``SymInt`` or
int) beside the concrete value, the tracked length (a ``SymInt`` over the input length, or
None), and where the sequence sits in the input. Reaching the end of the input (the end of an
iteration, an index or a slice past the end, a comparison with something longer) records
``len > n`` (``_end_branch``) so the search can grow the input; items past the end
(``_phantoms``) are the input bytes a longer input would have. The text methods that scan
(``find``, ``split``, ``strip``, ...) are ``seqscan``'s.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import z3

from symfence.worker.concolic import symbolic as _sym
from symfence.worker.concolic.symbolic import (
    SymBool,
    SymInt,
    all_equal,
    fix,
    implicit_branch,
    note_concretised,
    value_of,
)


def _active() -> Any:
    return _sym._active


def _norm_index(i: Any, n: int) -> int:
    i = value_of(i)
    if i < 0:
        i += n
    return min(max(i, 0), n)


def _min(a: Any, b: Any) -> Any:
    """``min(a, b)`` for ints and SymInts, symbolic if either is."""
    if not (isinstance(a, SymInt) or isinstance(b, SymInt)):
        return min(a, b)
    value = min(value_of(a), value_of(b))
    syms = [x for x in (a, b) if isinstance(x, SymInt)]
    if any(x.expr is None for x in syms):
        return SymInt(value, None, 0)
    w = max(x.width for x in syms)
    ta = _sym.extend(a.term(), a.width, w) if isinstance(a, SymInt) else a
    tb = _sym.extend(b.term(), b.width, w) if isinstance(b, SymInt) else b
    deps = (a.deps if isinstance(a, SymInt) else 0) | (b.deps if isinstance(b, SymInt) else 0)
    return SymInt(value, z3.If(ta <= tb, ta, tb), deps, w)


def _concrete_bound(x: Any) -> Any:
    if isinstance(x, SymInt):
        return x.concrete("index")
    return x


class _Seq:
    """The core shared by SymBytes and SymStr (a mixin: items, length, indexing, comparison)."""

    _items: list[Any]
    _len: SymInt | None
    _open: bool  # whether this sequence ends where the input ends (its length can grow)
    _base: int | None = None  # offset of item 0 in the input, for a contiguous part of it
    _cap: int | None = None  # a slice past the end: its length once the input is long enough
    _kind = "seq"

    # -- hooks provided by the concrete classes -----------------------------------------------

    def _copy_as(self, cls: Any) -> Any:
        """The same items as an exact ``cls`` (SymBytes or SymStr): what ``bytes(x)``/``str(x)``
        and ``memoryview.tobytes`` give of a view or a subclass's instance (the same place too)."""
        copy = cls(self._plain(), list(self._items), self._len, self._open)
        copy._base = self._base
        return copy

    @classmethod
    def _make(cls, items: list[Any], length: SymInt | None, open_end: bool) -> Any:
        raise NotImplementedError

    def _unit(self, item: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def _other_items(cls, other: object) -> list[Any] | None:
        raise NotImplementedError

    def _plain(self) -> Any:
        raise NotImplementedError

    # -- length ---------------------------------------------------------------------------------

    def _end_branch(self, frame: Any, n: int, at: int | None = None, then: list[Any] | None = None) -> None:
        """The work reached the end at ``n`` items: record ``len > at`` (false) if it could grow.

        ``then``: what a scan looked for; its negation asks for a longer input that has it
        right after the current end (a ``find`` that failed at the end finds it next time).
        """
        length = self._len
        if not self._open or not isinstance(length, SymInt) or length.value != n:
            return
        bound = n if at is None else at

        def build() -> tuple[Any, int] | None:
            if length.expr is None:
                return None
            cond, deps = length.term() > bound, length.deps
            if then:
                phantoms = self._phantoms(n, len(then))
                more = all_equal(phantoms, then) if phantoms is not None else None
                if isinstance(more, SymBool) and more.cond is not None:
                    cond, deps = z3.And(length.term() >= n + len(then), more.cond), deps | more.deps
            return cond, deps

        implicit_branch(frame, False, build, end_of_input=n)

    def _phantoms(self, q: int, count: int) -> list[Any] | None:
        """Items ``q .. q + count - 1`` past the end: the input bytes a longer input would have."""
        rec = _active()
        if self._base is None or not self._open or rec is None or not rec.symbolic:
            return None
        first = self._base + q
        return [SymInt(0, z3.ZeroExt(_sym.WIDTH - 8, z3.BitVec(f"b{j}", 8)), 1 << (j + 1))
                for j in range(first, first + count)]

    def _match_at(self, p: int, sub: list[Any]) -> Any:
        """Whether ``sub`` occurs at position ``p`` (False, maybe symbolic on the length, past the end)."""
        k = len(sub)
        avail = self._items[p:p + k]
        if len(avail) == k:
            return all_equal(avail, sub)
        length = self._len
        if not isinstance(length, SymInt):
            return False
        prefix = all_equal(avail, sub[: len(avail)])
        if prefix is False:
            return False
        if length.expr is None:
            return SymBool(False, 0, None)
        cond = length.term() >= p + k
        deps = length.deps
        phantoms = self._phantoms(p + len(avail), k - len(avail))
        if phantoms is not None:
            more = all_equal(phantoms, sub[len(avail):])
            if isinstance(more, SymBool) and more.cond is not None:
                cond, deps = z3.And(cond, more.cond), deps | more.deps
        if isinstance(prefix, SymBool):
            if prefix.cond is None:
                return SymBool(False, 0, None)
            cond = z3.And(cond, prefix.cond)
            deps |= prefix.deps
        return SymBool(False, deps, cond)

    # -- indexing -------------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self._slice(key, sys._getframe(1))
        n = len(self._items)
        if isinstance(key, SymInt):
            frame = sys._getframe(1)
            v = key.value
            inside = implicit_branch(frame, -n <= v < n, lambda: (
                z3.And(key.term() >= -n, key.term() < n), key.deps) if key.expr is not None else None)
            if not inside:
                raise IndexError(f"{self._kind} index out of range")
            # An index that is itself input: decided (negated: another position), not an If
            # chain over every item, which makes each later query far harder for the solver.
            implicit_branch(frame, True, lambda: (key.term() == v, key.deps) if key.expr is not None else None)
            return self._unit(self._items[v])
        if not isinstance(key, int):
            return self._plain()[key]  # the usual TypeError
        if key >= n:
            self._end_branch(sys._getframe(1), n, key)
            raise IndexError(f"{self._kind} index out of range")
        try:
            return self._unit(self._items[key])
        except IndexError:
            raise IndexError(f"{self._kind} index out of range") from None

    def _slice(self, key: slice, frame: Any) -> Any:
        start, stop, step = key.start, key.stop, key.step
        c_start, c_stop, c_step = (fix(start, "slice_start", frame), _concrete_bound(stop),
                                   fix(step, "slice_step", frame))
        items = self._items[slice(c_start, c_stop, c_step)]
        n = len(self._items)
        length = None
        open_end = False
        if c_step in (None, 1) and (c_start is None or c_start >= 0) and (c_stop is None or c_stop >= 0):
            sym_stop = isinstance(stop, SymInt)
            open_end = self._open and (sym_stop or c_stop is None or c_stop > n)
            own = self._len
            if isinstance(own, SymInt):
                if c_stop is None:
                    end: Any = own
                else:
                    # min(stop, len): the input may grow into the slice, or shrink below it (a
                    # slice inside the input keeps its length term, so a length check on it is a
                    # branch whatever the input's length: runs of longer and shorter inputs
                    # record the same branches)
                    end = _min(stop, own)
                if end is not None:
                    begin = 0 if c_start is None else start
                    result = end - begin
                    if isinstance(result, SymInt) and result.value < 0:
                        # a slice starting past the end is empty until the input grows past it
                        t = result.term()
                        result = SymInt(0, None if t is None else z3.If(t < 0, 0, t),
                                        result.deps, result.width)
                    length = result if isinstance(result, SymInt) else None
        result = self._make(items, length, open_end)
        if self._base is not None and c_step in (None, 1) and (c_start is None or c_start >= 0):
            result._base = self._base + (0 if c_start is None else c_start)
            if open_end and c_stop is not None and not isinstance(stop, SymInt):
                result._cap = c_stop - (0 if c_start is None else c_start)  # length once grown
        return result

    def __iter__(self) -> Iterator[Any]:
        return self._iterate()

    def _iterate(self) -> Iterator[Any]:
        items = self._items
        for item in items:
            yield self._unit(item)
        self._end_branch(sys._getframe(1), len(items))

    # -- comparisons ----------------------------------------------------------------------------

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        items = self._other_items(other)
        if items is None:
            return NotImplemented
        if len(items) == len(self._items):
            return all_equal(self._items, items)
        if not isinstance(other, _Seq):
            self._splice(items)
        length = self._len
        if isinstance(other, _Seq) or not isinstance(length, SymInt):
            return False
        # Only a different length tells them apart: the input may grow or shrink to match.
        common = min(len(items), len(self._items))
        prefix = all_equal(self._items[:common], items[:common])
        if prefix is False:
            return False
        if length.expr is None:
            return SymBool(False, 0, None)
        cond = length.term() == len(items)
        deps = length.deps
        if len(items) > len(self._items):
            phantoms = self._phantoms(len(self._items), len(items) - len(self._items))
            if phantoms is not None:
                more = all_equal(phantoms, items[len(self._items):])
                if isinstance(more, SymBool) and more.cond is not None:
                    cond, deps = z3.And(cond, more.cond), deps | more.deps
        if isinstance(prefix, SymBool):
            if prefix.cond is None:
                return SymBool(False, 0, None)
            cond, deps = z3.And(cond, prefix.cond), deps | prefix.deps
        return SymBool(False, deps, cond)

    def _splice(self, constant: list[int]) -> None:
        """This contiguous piece of the input is compared with a constant of another length:
        note the input with the piece replaced by it (``Recorder.splice``; ASCII for text)."""
        rec = _active()
        if rec is None or not rec.symbolic or self._base is None:
            return
        limit = 0x100 if self._kind == "bytes" else 0x80
        if all(0 <= v < limit for v in constant):
            rec.splice(self._base, self._base + len(self._items), bytes(constant))
            rec.constant(bytes(constant))

    def __bool__(self) -> bool:
        """Truth is the concrete length; an empty piece of the input notes where it is, so a
        constant compared later can be inserted there (``Recorder.insertion``)."""
        if not self._items and self._base is not None:
            rec = _active()
            if rec is not None:
                rec.insertion(self._base)
        return bool(self._items)

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        result = self.__eq__(other)
        if isinstance(result, SymBool):
            return result.negated()
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        note_concretised("hash")
        return hash(self._plain())

    def _ordering(self, other: object, op: Callable[[Any, Any], bool]) -> Any:
        note_concretised(f"{self._kind}.compare")
        other = other._plain() if isinstance(other, _Seq) else other
        return op(self._plain(), other)

    def __lt__(self, o: object) -> Any: return self._ordering(o, lambda a, b: a < b)
    def __le__(self, o: object) -> Any: return self._ordering(o, lambda a, b: a <= b)
    def __gt__(self, o: object) -> Any: return self._ordering(o, lambda a, b: a > b)
    def __ge__(self, o: object) -> Any: return self._ordering(o, lambda a, b: a >= b)

    # -- concatenation --------------------------------------------------------------------------

    def __add__(self, other: Any) -> Any:
        items = self._other_items(other)
        if items is None:
            return self._plain() + other  # the usual TypeError
        length = None
        if isinstance(self._len, SymInt):
            extra = other._len if isinstance(other, _Seq) else len(items)
            if extra is not None:
                total = self._len + extra
                length = total if isinstance(total, SymInt) else None
        return self._make(self._items + items, length, False)

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, (bytearray, memoryview)):
            # bytearray's own concatenation, which keeps its type (and ``+=`` its identity): h11's
            # buffer, a bytearray, became immutable here, and its ``del buf[:n]`` a false finding
            note_concretised(f"{type(other).__name__}.concat")
            return NotImplemented
        items = self._other_items(other)
        if items is None:
            return NotImplemented
        length = None
        if isinstance(self._len, SymInt):
            total = len(items) + self._len
            length = total if isinstance(total, SymInt) else None
        return self._make(items + self._items, length, self._open)
