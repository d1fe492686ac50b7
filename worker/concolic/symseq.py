"""Symbolic ``bytes`` and ``str``: real bytes/str objects whose items, length and methods stay symbolic.

``SymBytes`` (items: byte values) and ``SymStr`` (items: code points) hold the concrete value
(C code sees exactly the plain program's data) plus a list of items (``SymInt`` or int) and
the tracked length (a ``SymInt`` over the input length, or None). Indexing, slicing,
iteration, comparisons and the common methods are modelled as the Python code that would do
the same work: a scan (``find``, ``split``, ``strip``, ``in``) records the comparison at each
position it looks at as an implicit branch, so negating one moves the match; reaching the end
of the input (the end of an iteration, a scan that found nothing, an index or a slice past the
end, a comparison with something longer) records ``len > n`` so the search can grow the input.
``bytes.decode`` (ASCII, Latin-1, UTF-8) gives a ``SymStr``, ``str.encode`` a ``SymBytes``.
Every other method works on the concrete value and counts a concretisation
(``bytes.<method>`` / ``str.<method>``).

Why this module is over 500 lines: it models the methods of two builtin types item by item
(each as the Python loop it stands for); they share the scan and bound helpers at the top.
"""

from __future__ import annotations

import codecs
import sys
from typing import Any, Callable, Iterator

import z3

from symfence.worker.concolic.symbolic import (
    SymBool,
    SymInt,
    all_equal,
    any_true,
    decide,
    fix,
    implicit_branch,
    in_ranges,
    note_concretised,
    ranges_of,
    select,
    value_of,
)
from symfence.worker.concolic import symbolic as _sym


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
    """Shared models of SymBytes and SymStr (a mixin: items, length, methods)."""

    _items: list[Any]
    _len: SymInt | None
    _open: bool  # whether this sequence ends where the input ends (its length can grow)
    _base: int | None = None  # offset of item 0 in the input, for a contiguous part of it
    _cap: int | None = None  # a slice past the end: its length once the input is long enough
    _kind = "seq"
    _classes: dict[str, list[tuple[int, int]]] = {}

    # -- hooks provided by the concrete classes -----------------------------------------------

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
            return type(self).__mro__[2].__getitem__(self, key)  # the usual TypeError
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

    # -- prefix, suffix, search -------------------------------------------------------------------

    def _affix(self, affix: Any, start: Any, end: Any, at_end: bool, frame: Any) -> Any:
        if isinstance(affix, tuple):
            for one in affix:
                if decide(self._affix(one, start, end, at_end, frame), frame):
                    return True
            return False
        sub = self._other_items(affix)
        if sub is None:
            return getattr(self._plain(), "endswith" if at_end else "startswith")(affix)  # TypeError
        if start is not None or end is not None:
            n = len(self._items)
            lo = _norm_index(_concrete_bound(start) or 0, n)
            hi = n if end is None else _norm_index(_concrete_bound(end), n)
            view = self._slice(slice(lo, hi if end is not None else None), frame)
            return view._affix(affix, None, None, at_end, frame)
        k = len(sub)
        if at_end:
            if k > len(self._items):
                return False
            return all_equal(self._items[len(self._items) - k:], sub)
        return self._match_at(0, sub)

    def startswith(self, prefix: Any, start: Any = None, end: Any = None) -> Any:  # type: ignore[override]
        return self._affix(prefix, start, end, False, sys._getframe(1))

    def endswith(self, suffix: Any, start: Any = None, end: Any = None) -> Any:  # type: ignore[override]
        return self._affix(suffix, start, end, True, sys._getframe(1))

    def _find(self, sub_obj: Any, start: Any, end: Any, frame: Any, grow_into: bool = True) -> int:
        sub = self._other_items(sub_obj)
        if sub is None:
            if isinstance(self, SymBytes) and isinstance(sub_obj, int):
                sub = [sub_obj]
            else:
                return self._plain().find(sub_obj)  # the usual TypeError
        n = len(self._items)
        lo = 0 if start is None else _norm_index(_concrete_bound(start), n)
        hi = n if end is None else _norm_index(_concrete_bound(end), n)
        k = len(sub)
        for p in range(lo, hi - k + 1):
            if decide(all_equal(self._items[p:p + k], sub), frame):
                return p
        if end is None:
            self._end_branch(frame, n, then=sub if grow_into else None)
        return -1

    def find(self, sub: Any, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        return self._find(sub, start, end, sys._getframe(1))

    def index(self, sub: Any, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        found = self._find(sub, start, end, sys._getframe(1))
        if found < 0:
            raise ValueError("subsection not found" if isinstance(self, bytes) else "substring not found")
        return found

    def __contains__(self, needle: object) -> Any:
        frame = sys._getframe(1)
        if isinstance(self, SymBytes) and isinstance(needle, int):
            value = bytes.__contains__(self, value_of(needle))  # ValueError outside range(256)
            result = any_true([all_equal([item], [needle]) for item in self._items], value)
            if result is False and not isinstance(needle, SymInt):
                self._end_branch(frame, len(self._items))
            return result
        return self._find(needle, None, None, frame) >= 0

    def count(self, sub: Any, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        frame = sys._getframe(1)
        found, pos = 0, start
        items = self._other_items(sub)
        if items is None or not items:
            note_concretised(f"{self._kind}.count")
            return self._plain().count(sub, *(x for x in (start, end) if x is not None))
        while True:
            p = self._find(sub, pos, end, frame)
            if p < 0:
                return found
            found += 1
            pos = p + len(items)

    # -- splitting and stripping ----------------------------------------------------------------

    def _is_space(self, item: Any) -> Any:
        ranges = self._classes.get("isspace") or self._class_ranges("isspace")
        value = value_of(item) in {v for lo, hi in ranges for v in range(lo, hi + 1)}
        return in_ranges(item, ranges, value)

    def split(self, sep: Any = None, maxsplit: int = -1) -> list[Any]:  # type: ignore[override]
        frame = sys._getframe(1)
        maxsplit = value_of(maxsplit)
        if sep is None:
            return self._split_space(maxsplit, frame)
        sub = self._other_items(sep)
        if sub is None or not sub:
            return self._plain().split(sep, maxsplit)  # TypeError / ValueError("empty separator")
        parts = []
        pos = 0
        while maxsplit < 0 or len(parts) < maxsplit:
            p = self._find(sep, pos, None, frame, grow_into=False)  # the last part ends the input
            if p < 0:
                break
            parts.append(self._slice(slice(pos, p), frame))
            pos = p + len(sub)
        parts.append(self._slice(slice(pos, None), frame))
        return parts

    def _split_space(self, maxsplit: int, frame: Any) -> list[Any]:
        parts = []
        n = len(self._items)
        pos = 0
        while True:
            while pos < n and decide(self._is_space(self._items[pos]), frame):
                pos += 1
            if pos >= n:
                self._end_branch(frame, n)
                return parts
            if 0 <= maxsplit <= len(parts):
                rest = self._slice(slice(pos, None), frame)
                stripped = rest.rstrip()
                parts.append(stripped)
                return parts
            begin = pos
            while pos < n and not decide(self._is_space(self._items[pos]), frame):
                pos += 1
            parts.append(self._slice(slice(begin, pos), frame))

    def replace(self, old: Any, new: Any, count: Any = -1) -> Any:  # type: ignore[override]
        """Each occurrence found by a scan (its comparisons are branches) is replaced."""
        frame = sys._getframe(1)
        sub, rep = self._other_items(old), self._other_items(new)
        count = value_of(count)
        if sub is None or rep is None or not sub:
            note_concretised(f"{self._kind}.replace")
            return self._plain().replace(old, new, count)
        items: list[Any] = []
        pos, done = 0, 0
        while count < 0 or done < count:
            p = self._find(old, pos, None, frame, grow_into=False)
            if p < 0:
                break
            items += self._items[pos:p] + list(rep)
            pos, done = p + len(sub), done + 1
        if not done:
            return self
        items += self._items[pos:]
        return self._make(items, None, False)

    def splitlines(self, keepends: bool = False) -> list[Any]:  # type: ignore[override]
        """Lines, by a scan testing each character for a line boundary (``\\r\\n`` is one)."""
        frame = sys._getframe(1)
        ranges = self._classes.get("linebreak") or self._linebreaks()
        items = self._items
        n = len(items)
        if any(value_of(x) > 255 for x in items if isinstance(x, SymInt)):
            note_concretised(f"{self._kind}.splitlines")
            return self._plain().splitlines(keepends)
        lines = []
        pos = p = 0
        while p < n:
            x = items[p]
            v = value_of(x)
            if decide(in_ranges(x, ranges, any(lo <= v <= hi for lo, hi in ranges)), frame):
                end = p + 1
                if v == 13 and p + 1 < n and decide(all_equal([items[p + 1]], [10]), frame):
                    end = p + 2
                lines.append(self._slice(slice(pos, end if keepends else p), frame))
                pos = p = end
            else:
                p += 1
        if pos < n:
            lines.append(self._slice(slice(pos, None), frame))
        self._end_branch(frame, n)
        return lines

    @classmethod
    def _linebreaks(cls) -> list[tuple[int, int]]:
        if cls._kind == "bytes":
            ranges = [(10, 10), (13, 13)]
        else:
            ranges = ranges_of(v for v in range(256) if len(("a" + chr(v) + "a").splitlines()) > 1)
        cls._classes["linebreak"] = ranges
        return ranges

    def partition(self, sep: Any) -> tuple[Any, Any, Any]:  # type: ignore[override]
        frame = sys._getframe(1)
        sub = self._other_items(sep)
        if sub is None or not sub:
            return self._plain().partition(sep)
        p = self._find(sep, None, None, frame)
        if p < 0:
            return self, self._make([], None, False), self._make([], None, False)
        return (self._slice(slice(0, p), frame), self._make(list(sub), None, False),
                self._slice(slice(p + len(sub), None), frame))

    def _strip(self, chars: Any, left: bool, right: bool, frame: Any) -> Any:
        if chars is None:
            test = self._is_space
        else:
            members = self._other_items(chars)
            if members is None:
                return getattr(self._plain(), "strip")(chars)  # TypeError
            concrete = {value_of(m) for m in members}
            ranges = ranges_of(concrete)

            def test(item: Any) -> Any:
                return in_ranges(item, ranges, value_of(item) in concrete)
        n = len(self._items)
        lo, hi = 0, n
        if left:
            while lo < n and decide(test(self._items[lo]), frame):
                lo += 1
            if lo == n:
                self._end_branch(frame, n)
        if right:
            while hi > lo and decide(test(self._items[hi - 1]), frame):
                hi -= 1
        if lo == 0 and hi == n:
            return self
        return self._slice(slice(lo, hi if hi < n else None), frame)

    def strip(self, chars: Any = None) -> Any:  # type: ignore[override]
        return self._strip(chars, True, True, sys._getframe(1))

    def lstrip(self, chars: Any = None) -> Any:  # type: ignore[override]
        return self._strip(chars, True, False, sys._getframe(1))

    def rstrip(self, chars: Any = None) -> Any:  # type: ignore[override]
        return self._strip(chars, False, True, sys._getframe(1))

    # -- character classes and case --------------------------------------------------------------

    @classmethod
    def _class_ranges(cls, name: str) -> list[tuple[int, int]]:
        raise NotImplementedError

    def _predicate(self, name: str) -> Any:
        items = self._items
        value = getattr(self._plain(), name)()
        if not items:
            return value
        ranges = self._classes.get(name) or self._class_ranges(name)
        if any(isinstance(x, SymInt) and x.value > 255 for x in items):
            note_concretised(f"{self._kind}.{name}")
            return value
        tests = [in_ranges(x, ranges, bool(getattr(self._plain_unit(value_of(x)), name)()))
                 for x in items]
        if any(t is False for t in tests):
            return False
        symbolic = [t for t in tests if isinstance(t, SymBool)]
        if not symbolic:
            return value
        if any(t.cond is None for t in symbolic):
            return SymBool(value, 0, None)
        deps = 0
        for t in symbolic:
            deps |= t.deps
        return SymBool(value, deps, z3.And(*[t.cond for t in symbolic]))

    def _plain_unit(self, v: int) -> Any:
        raise NotImplementedError

    def isdigit(self) -> Any: return self._predicate("isdigit")  # type: ignore[override]
    def isspace(self) -> Any: return self._predicate("isspace")  # type: ignore[override]
    def isalpha(self) -> Any: return self._predicate("isalpha")  # type: ignore[override]
    def isalnum(self) -> Any: return self._predicate("isalnum")  # type: ignore[override]
    def islower(self) -> Any:  # type: ignore[override]
        note_concretised(f"{self._kind}.islower")
        return self._plain().islower()

    def isupper(self) -> Any:  # type: ignore[override]
        note_concretised(f"{self._kind}.isupper")
        return self._plain().isupper()

    def _case(self, name: str) -> Any:
        mapping = _CASE_TABLES.get((self._kind, name))
        if mapping is None:
            mapping = _case_table(self._kind, name)
        items = []
        for x in self._items:
            v = value_of(x)
            if v > 255 or v in mapping.multi:
                note_concretised(f"{self._kind}.{name}")
                return getattr(self._plain(), name)()
            if isinstance(x, SymInt) and x.expr is not None:
                t = x.term()
                chain = t
                for delta, ranges in mapping.deltas:
                    cond = z3.Or(*[z3.And(t >= lo, t <= hi) for lo, hi in ranges])
                    chain = z3.If(cond, t + delta, chain)
                items.append(SymInt(mapping.apply(v), chain, x.deps, x.width))
            elif isinstance(x, SymInt):
                items.append(SymInt(mapping.apply(v), None, 0))
            else:
                items.append(mapping.apply(v))
        return self._make(items, self._len, self._open)

    def lower(self) -> Any: return self._case("lower")  # type: ignore[override]
    def upper(self) -> Any: return self._case("upper")  # type: ignore[override]

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
        items = self._other_items(other)
        if items is None:
            return NotImplemented
        length = None
        if isinstance(self._len, SymInt):
            total = len(items) + self._len
            length = total if isinstance(total, SymInt) else None
        return self._make(items + self._items, length, self._open)


class _CaseTable:
    def __init__(self, deltas: list[tuple[int, list[tuple[int, int]]]], table: dict[int, int],
                 multi: set[int]):
        self.deltas = deltas
        self.table = table
        self.multi = multi

    def apply(self, v: int) -> int:
        return self.table.get(v, v)


_CASE_TABLES: dict[tuple[str, str], _CaseTable] = {}


def _case_table(kind: str, name: str) -> _CaseTable:
    table: dict[int, int] = {}
    multi: set[int] = set()
    for v in range(256):
        mapped = getattr(bytes([v]) if kind == "bytes" else chr(v), name)()
        if len(mapped) != 1 or (mapped[0] if kind == "bytes" else ord(mapped)) > 255:
            multi.add(v)
            continue
        m = mapped[0] if kind == "bytes" else ord(mapped)
        if m != v:
            table[v] = m
    by_delta: dict[int, list[int]] = {}
    for v, m in table.items():
        by_delta.setdefault(m - v, []).append(v)
    deltas = [(d, ranges_of(vs)) for d, vs in by_delta.items()]
    result = _CaseTable(deltas, table, multi)
    _CASE_TABLES[(kind, name)] = result
    return result


# ---------------------------------------------------------------------------------------------
# bytes


def _bytes_items(other: object) -> list[Any] | None:
    if isinstance(other, SymBytes):
        return other._items
    if isinstance(other, (bytes, bytearray, memoryview)):
        return list(bytes(other))
    return None


_UTF8 = {"utf-8", "utf8", "u8", "utf"}
_ASCII = {"ascii", "us-ascii", "646"}
_LATIN1 = {"latin-1", "latin1", "latin_1", "iso-8859-1", "iso8859-1", "8859", "cp819", "l1"}


class SymBytes(_Seq, bytes):
    """Real ``bytes`` (the concrete input or a part of it) with symbolic items and length."""

    _kind = "bytes"
    _classes: dict[str, list[tuple[int, int]]] = {}

    def __new__(cls, concrete: bytes, items: list[Any], length: SymInt | None = None,
                open_end: bool = True) -> SymBytes:
        obj = bytes.__new__(cls, concrete)
        obj._items = items
        obj._len = length
        obj._open = open_end
        return obj

    @classmethod
    def _make(cls, items: list[Any], length: SymInt | None, open_end: bool) -> SymBytes:
        return SymBytes(bytes(value_of(x) for x in items), items, length, open_end)

    def _unit(self, item: Any) -> Any:
        return item

    def _plain_unit(self, v: int) -> bytes:
        return bytes([v])

    @classmethod
    def _other_items(cls, other: object) -> list[Any] | None:
        return _bytes_items(other)

    @classmethod
    def _class_ranges(cls, name: str) -> list[tuple[int, int]]:
        ranges = ranges_of(v for v in range(256) if getattr(bytes([v]), name)())
        cls._classes[name] = ranges
        return ranges

    def _plain(self) -> bytes:
        return bytes(memoryview(self))

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return bytes, (self._plain(),)

    def __bytes__(self) -> bytes:
        note_concretised("bytes()")
        return self._plain()

    def __hash__(self) -> int:
        note_concretised("hash")
        return hash(self._plain())

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> Any:  # type: ignore[override]
        plain = self._plain()
        text = plain.decode(encoding, errors)  # the real errors, exactly
        try:
            name = codecs.lookup(encoding).name
        except LookupError:
            name = encoding
        rec = _active()
        if name in ("iso8859-1", "latin-1") or encoding.lower() in _LATIN1:
            return self._same_units(SymStr(text, list(self._items), self._len, self._open))
        if name in ("ascii",) or encoding.lower() in _ASCII or name in ("utf-8",) or encoding.lower() in _UTF8:
            if len(text) == len(plain) and all(value_of(x) < 0x80 for x in self._items):
                if rec is not None and rec.symbolic:
                    for x in self._items:
                        if isinstance(x, SymInt) and x.expr is not None:
                            rec.assume(x.term() < 0x80, x.deps)
                return self._same_units(SymStr(text, list(self._items), self._len, self._open))
            if name == "utf-8" and errors == "strict":
                return self._decode_utf8(text)
        note_concretised(f"bytes.decode:{name}")
        return text

    def _same_units(self, other: Any) -> Any:
        other._base = self._base
        return other

    def _decode_utf8(self, text: str) -> SymStr:
        """UTF-8 with multi-byte characters: ASCII bytes stay symbolic, the others are pinned."""
        rec = _active()
        items: list[Any] = []
        pos = 0
        for ch in text:
            width = len(ch.encode("utf-8"))
            chunk = self._items[pos:pos + width]
            pos += width
            if width == 1:
                x = chunk[0]
                if rec is not None and isinstance(x, SymInt) and x.expr is not None:
                    rec.assume(x.term() < 0x80, x.deps)
                items.append(x)
                continue
            note_concretised("utf8_multibyte")
            for x in chunk:
                if rec is not None and isinstance(x, SymInt) and x.expr is not None:
                    rec.assume(x.term() == x.value, x.deps)
            items.append(ord(ch))
        return SymStr(text, items, None, False)

    def __iter__(self) -> Iterator[Any]:
        return self._iterate()


# ---------------------------------------------------------------------------------------------
# str


def _str_items(other: object) -> list[Any] | None:
    if isinstance(other, SymStr):
        return other._items
    if isinstance(other, str):
        return [ord(c) for c in other]
    return None


class SymStr(_Seq, str):
    """Real ``str`` (decoded from the input) with symbolic code points and length."""

    _kind = "str"
    _classes: dict[str, list[tuple[int, int]]] = {}

    def __new__(cls, concrete: str, items: list[Any], length: SymInt | None = None,
                open_end: bool = False) -> SymStr:
        obj = str.__new__(cls, concrete)
        obj._items = items
        obj._len = length
        obj._open = open_end
        return obj

    @classmethod
    def _make(cls, items: list[Any], length: SymInt | None, open_end: bool) -> SymStr:
        return SymStr("".join(chr(value_of(x)) for x in items), items, length, open_end)

    def _unit(self, item: Any) -> SymStr:
        return SymStr(chr(value_of(item)), [item], None, False)

    def _plain_unit(self, v: int) -> str:
        return chr(v)

    @classmethod
    def _other_items(cls, other: object) -> list[Any] | None:
        return _str_items(other)

    @classmethod
    def _class_ranges(cls, name: str) -> list[tuple[int, int]]:
        ranges = ranges_of(v for v in range(256) if getattr(chr(v), name)())
        cls._classes[name] = ranges
        return ranges

    def _plain(self) -> str:
        return str.__str__(self)

    def __str__(self) -> str:
        return str.__str__(self)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return str, (self._plain(),)

    def __hash__(self) -> int:
        note_concretised("hash")
        return hash(self._plain())

    def __iter__(self) -> Iterator[Any]:
        return self._iterate()

    def isdecimal(self) -> Any: return self._predicate("isdecimal")  # type: ignore[override]
    def isnumeric(self) -> Any: return self._predicate("isnumeric")  # type: ignore[override]

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> Any:  # type: ignore[override]
        plain = self._plain().encode(encoding, errors)
        try:
            name = codecs.lookup(encoding).name
        except LookupError:
            name = encoding
        limit = 0x100 if name in ("iso8859-1", "latin-1") else 0x80
        if name in ("iso8859-1", "latin-1", "ascii", "utf-8") and all(value_of(x) < limit for x in self._items):
            rec = _active()
            if rec is not None and limit == 0x80:
                for x in self._items:
                    if isinstance(x, SymInt) and x.expr is not None:
                        rec.assume(x.term() < 0x80, x.deps)
            result = SymBytes(plain, list(self._items), self._len, self._open)
            result._base = self._base
            return result
        note_concretised(f"str.encode:{name}")
        return plain


# ---------------------------------------------------------------------------------------------
# Unmodelled methods: concrete, counted


def _counted(base: type, kind: str, name: str) -> Callable[..., Any]:
    method = getattr(base, name)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        note_concretised(f"{kind}.{name}")
        return method(self._plain(), *args, **kwargs)

    wrapper.__name__ = name
    return wrapper


for _cls, _base in ((SymBytes, bytes), (SymStr, str)):
    for _name in dir(_base):
        if _name.startswith("_") or _name in ("maketrans", "fromhex"):
            continue
        if not any(_name in klass.__dict__ for klass in (_cls, _Seq)):
            setattr(_cls, _name, _counted(_base, _cls._kind, _name))
    for _name in ("__mod__", "__rmod__", "__mul__", "__rmul__"):
        if _name in _base.__dict__:
            setattr(_cls, _name, _counted(_base, _cls._kind, _name))


def sym_ord(c: Any) -> Any:
    """``ord`` keeping the code point of a one-character SymStr (or byte of a SymBytes)."""
    if isinstance(c, (SymStr, SymBytes)) and len(c._items) == 1:
        item = c._items[0]
        return item
    return ord(c)


def sym_chr(i: Any) -> Any:
    """``chr`` of a SymInt: a one-character SymStr."""
    if isinstance(i, SymInt):
        text = chr(i.value)  # the usual ValueError
        return SymStr(text, [i], None, False)
    return chr(i)
