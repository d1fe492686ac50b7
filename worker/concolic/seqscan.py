"""The text methods of symbolic ``bytes`` and ``str``, each modelled as the scan it performs.

A scan (``find``, ``split``, ``strip``, ``replace``, ``in``, the character-class predicates)
records the comparison at each position it looks at as an implicit branch, so negating one
moves the match; a scan that reaches the end of the input without a match records
``len > n`` (with what it looked for right after the end), so the search can grow the input
into one that has it. ``lower``/``upper`` map each item through an If chain over the case
table. ``_Scans`` sits between ``_Seq`` (``seqcore``) and the concrete types (``symseq``).
"""

from __future__ import annotations

import sys
from typing import Any

import z3

from symfence.worker.concolic.seqcore import _concrete_bound, _norm_index, _Seq
from symfence.worker.concolic.symbolic import (
    SymInt,
    all_equal,
    all_true,
    any_true,
    decide,
    in_ranges,
    note_concretised,
    ranges_of,
    value_of,
)


class _Scans(_Seq):
    """The scanning methods of SymBytes and SymStr (a mixin over ``_Seq``)."""

    _classes: dict[str, list[tuple[int, int]]] = {}

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
            if self._kind == "bytes" and isinstance(sub_obj, int):
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
        if self._kind == "bytes" and isinstance(needle, int):
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

    def expandtabs(self, tabsize: Any = 8) -> Any:  # type: ignore[override]
        """Without a tab (a scan: its comparisons are branches) the text itself; with one, the
        plain result (noted). pyparsing expands the tabs of every text it parses first: the
        whole input was concretised there, and the engine followed nothing of a grammar."""
        tab = "\t" if self._kind == "str" else b"\t"
        if self._find(tab, 0, None, sys._getframe(1), grow_into=False) < 0:
            return self
        note_concretised(f"{self._kind}.expandtabs")
        return self._plain().expandtabs(value_of(tabsize))

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
                return self._plain().strip(chars)  # TypeError
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
        return all_true(tests, value)

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

