"""Translates a Python regular expression (``re._parser``'s parse tree) into z3's regular-expression theory.

``translate(pattern, flags)`` gives the z3 ``ReRef`` accepting exactly the strings the pattern
matches, for the supported subset, or raises ``Unsupported`` naming what is outside it (the
caller concretises and counts the reason). Characters are z3 ``Char``s (code points up to
``MAX_CHAR``, z3's default Unicode range); a ``bytes`` pattern works on byte values.

Supported: literals, ``.`` (``DOTALL`` too), classes (ranges, negation, ``\\d \\w \\s`` and their
negations, Unicode or ASCII as ``re`` defines them for ``str`` and ``bytes``), groups (capturing,
non-capturing, inline flags), alternation, greedy and lazy repetition (``* + ? {m,n}``),
``IGNORECASE`` (Unicode case folding as ``re`` does it, for literals and ranges up to 512
code points), and the anchors ``^`` / ``\\A`` at the start and ``$`` / ``\\Z`` at the end of the
whole pattern (not under ``MULTILINE``). Not supported: back-references, look-around, word
boundaries, possessive and atomic forms, conditionals, ``LOCALE``, anchors elsewhere.

Greedy and lazy repetition differ only in which match is found, not in whether one exists, so
match or no match is exact; the spans of groups are taken from the concrete match (``relib``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import z3

from symfence.worker.concolic.z3scope import per_task

try:  # Python 3.11+
    from re import _constants as C  # type: ignore[attr-defined]
    from re import _parser as P  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse as P  # type: ignore[no-redef]

import _sre

_EXTRA_CASES: dict[int, tuple[int, ...]] = getattr(re._compiler, "_EXTRA_CASES", {})  # type: ignore[attr-defined]

MAX_CHAR = 0x2FFFF  # z3's default Unicode range (``encoding=unicode``)
_MAX_FOLDED_RANGE = 512
Ranges = tuple[tuple[int, int], ...]


class Unsupported(Exception):
    """The pattern uses something outside the translated subset; ``reason`` names it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Translation:
    """A pattern as z3 sees it: its body, and whether it is anchored at the start / end."""

    body: z3.ReRef
    at_start: bool  # ``^`` or ``\\A`` first: a search only matches at the start
    at_end: str  # "" (no anchor), "$" (end or before a final newline) or "Z" (end only)
    shortest: int  # the fewest characters a match spans
    longest: int  # the most (``MAX_WIDTH`` or more: unbounded)


def _normalise(ranges: list[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(r for r in ranges if r[0] <= r[1]):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _complement(ranges: Ranges, top: int = MAX_CHAR) -> Ranges:
    out, at = [], 0
    for lo, hi in ranges:
        if lo > at:
            out.append((at, lo - 1))
        at = max(at, hi + 1)
    if at <= top:
        out.append((at, top))
    return tuple(out)


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in a:
        for blo, bhi in b:
            if blo <= hi and lo <= bhi:
                out.append((max(lo, blo), min(hi, bhi)))
    return _normalise(out)


def _runs(values: list[int]) -> Ranges:
    return _normalise([(v, v) for v in values])


@functools.cache
def _category(name: str, unicode: bool) -> Ranges:
    """The code points of ``\\d``, ``\\s`` or ``\\w`` as ``re`` defines them."""
    top = MAX_CHAR + 1 if unicode else 128
    if name == "digit":
        test = (lambda c: c.isdecimal()) if unicode else (lambda c: "0" <= c <= "9")
    elif name == "space":
        test = (lambda c: c.isspace()) if unicode else (lambda c: c in " \t\n\r\f\v")
    else:
        test = ((lambda c: c.isalnum() or c == "_") if unicode
                else (lambda c: c.isascii() and (c.isalnum() or c == "_")))
    return _runs([v for v in range(top) if test(chr(v))])


@functools.lru_cache(maxsize=1)
def _fold_table() -> dict[int, list[int]]:
    """lower-case code point -> every code point ``re`` folds to it (``IGNORECASE``, Unicode)."""
    table: dict[int, list[int]] = {}
    for v in range(MAX_CHAR + 1):
        table.setdefault(_sre.unicode_tolower(v), []).append(v)
    return table


def _fold(v: int, unicode: bool) -> list[int]:
    if not unicode:
        if 0x41 <= v <= 0x5A or 0x61 <= v <= 0x7A:
            return [v | 0x20, v & ~0x20]
        return [v]
    low = _sre.unicode_tolower(v)
    folded = set(_fold_table().get(low, [v]))
    for extra in _EXTRA_CASES.get(low, ()):  # e.g. "s" and LATIN SMALL LETTER LONG S
        folded.update(_fold_table().get(_sre.unicode_tolower(extra), [extra]))
    return sorted(folded)


class _Translator:
    def __init__(self, is_bytes: bool, flags: int, domain: Ranges) -> None:
        self.is_bytes = is_bytes
        self.flags = flags
        self.domain = domain  # the code points the solver may write (classes are cut to them)

    @property
    def unicode(self) -> bool:
        return not self.is_bytes and not self.flags & re.ASCII

    def chars(self, ranges: Ranges) -> z3.ReRef:
        parts = [z3.Range(chr(lo), chr(hi)) for lo, hi in _intersect(ranges, self.domain)]
        if not parts:
            return z3.Empty(z3.ReSort(z3.StringSort()))
        return parts[0] if len(parts) == 1 else z3.Union(*parts)

    def folded(self, ranges: list[tuple[int, int]]) -> Ranges:
        if not self.flags & re.IGNORECASE:
            return _normalise(ranges)
        out: list[tuple[int, int]] = []
        for lo, hi in ranges:
            if hi - lo > _MAX_FOLDED_RANGE:
                raise Unsupported("ignorecase_wide_range")
            for v in range(lo, hi + 1):
                out.extend((f, f) for f in _fold(v, self.unicode))
        return _normalise(out)

    def in_class(self, items: list[tuple[Any, Any]]) -> Ranges:
        ranges: list[tuple[int, int]] = []
        categories: list[Ranges] = []
        negate = False
        for op, arg in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                ranges.append((arg, arg))
            elif op is C.RANGE:
                ranges.append(arg)
            elif op is C.CATEGORY:
                categories.append(self.category(arg))
            else:
                raise Unsupported(f"class_{str(op).lower()}")
        merged = list(self.folded(ranges))
        for cat in categories:
            merged.extend(cat)
        result = _normalise(merged)
        return _complement(result) if negate else result

    def category(self, code: Any) -> Ranges:
        name = str(code).lower()
        for kind in ("digit", "space", "word"):
            if name.endswith("_" + kind):
                ranges = _category(kind, self.unicode)
                return _complement(ranges) if "_not_" in name else ranges
        raise Unsupported(f"category_{name}")

    def sequence(self, items: Any, top: bool = False) -> tuple[z3.ReRef, bool, str]:
        parts: list[z3.ReRef] = []
        at_start, at_end = False, ""
        last = len(items) - 1
        for i, (op, arg) in enumerate(items):
            if op is C.AT:
                if self.flags & re.MULTILINE and arg in (C.AT_BEGINNING, C.AT_END):
                    raise Unsupported("anchor_multiline")
                if top and i == 0 and arg in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):
                    at_start = True
                    continue
                if top and i == last and arg in (C.AT_END, C.AT_END_STRING):
                    at_end = "$" if arg is C.AT_END else "Z"
                    continue
                raise Unsupported(f"anchor_{str(arg).lower()}")
            parts.append(self.node(op, arg))
        if not parts:
            body = z3.Re(z3.StringVal(""))
        else:
            body = parts[0] if len(parts) == 1 else z3.Concat(*parts)
        return body, at_start, at_end

    def node(self, op: Any, arg: Any) -> z3.ReRef:
        if op is C.LITERAL:
            return self.chars(self.folded([(arg, arg)]))
        if op is C.NOT_LITERAL:
            return self.chars(_complement(self.folded([(arg, arg)])))
        if op is C.ANY:
            if self.flags & re.DOTALL:
                return self.chars(((0, MAX_CHAR),))
            return self.chars(_complement(((10, 10),)))
        if op is C.IN:
            return self.chars(self.in_class(arg))
        if op is C.SUBPATTERN:
            _group, add_flags, del_flags, sub = arg
            saved = self.flags
            self.flags = (self.flags | add_flags) & ~del_flags
            try:
                return self.sequence(sub)[0]
            finally:
                self.flags = saved
        if op is C.BRANCH:
            alternatives = [self.sequence(alt)[0] for alt in arg[1]]
            return alternatives[0] if len(alternatives) == 1 else z3.Union(*alternatives)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = arg
            inner = self.sequence(sub)[0]
            if hi is C.MAXREPEAT or hi == C.MAXREPEAT:
                if lo == 0:
                    return z3.Star(inner)
                return z3.Concat(z3.Loop(inner, lo, lo), z3.Star(inner)) if lo > 1 else z3.Plus(inner)
            if lo == 0 and hi == 1:
                return z3.Option(inner)
            return z3.Loop(inner, lo, hi)
        raise Unsupported(str(op).lower())


ALL: Ranges = ((0, MAX_CHAR),)
_MAX_DOMAIN_EXTRAS = 64


def domain_for(values: Any) -> Ranges:
    """The code points the solver may write in a text holding ``values``: ASCII (Latin-1 if
    one is beyond it), plus the text's own characters above that (its real value always
    stays expressible). A smaller domain keeps the classes small (Unicode ``\\w`` is hundreds
    of ranges, which z3 cannot solve in time); a character outside it never matches, so at
    worst a child diverges, a path condition is never wrong."""
    chars = set(values)
    top = 0x7F if all(v < 0x80 for v in chars) else 0xFF
    extras = sorted(v for v in chars if v > top)
    if len(extras) > _MAX_DOMAIN_EXTRAS:
        return ALL
    return _normalise([(0, top), *((v, v) for v in extras)])


def translate(pattern: str | bytes, flags: int, domain: Ranges = ALL) -> Translation:
    """The z3 form of ``re.compile(pattern, flags)`` on texts of code points in ``domain``
    (``domain_for``); raises ``Unsupported`` (and ``re.error``). Cached, refusals too (a lexer
    tries the same patterns at every position)."""
    made = _translate(pattern, flags, domain)
    if isinstance(made, Unsupported):
        raise made
    return made


@per_task  # z3 terms: one task's context
@functools.lru_cache(maxsize=4096)
def _translate(pattern: str | bytes, flags: int, domain: Ranges) -> Translation | Unsupported:
    if flags & re.LOCALE:
        return Unsupported("locale")
    parsed = P.parse(pattern, flags)
    translator = _Translator(isinstance(pattern, bytes), parsed.state.flags, domain)
    try:
        body, at_start, at_end = translator.sequence(list(parsed.data), top=True)
    except Unsupported as exc:
        return exc
    except RecursionError:
        return Unsupported("too_deep")
    shortest, longest = parsed.getwidth()
    return Translation(body, at_start, at_end, shortest, longest)


@functools.lru_cache(maxsize=256)
def literal_of(pattern: str | bytes, flags: int) -> str | bytes | None:
    """The text a pattern of plain characters stands for (``";"``, ``", "``), else None."""
    if flags & (re.IGNORECASE | re.LOCALE):
        return None
    try:
        parsed = P.parse(pattern, flags)
    except re.error:
        return None
    if parsed.state.flags & re.IGNORECASE or not parsed.data:
        return None
    if not all(op is C.LITERAL for op, _ in parsed.data):
        return None
    codes = [arg for _, arg in parsed.data]
    return bytes(codes) if isinstance(pattern, bytes) else "".join(map(chr, codes))


def any_string(domain: Ranges = ALL) -> z3.ReRef:
    parts = [z3.Range(chr(lo), chr(hi)) for lo, hi in domain]
    return z3.Star(parts[0] if len(parts) == 1 else z3.Union(*parts))


def newline_or_nothing() -> z3.ReRef:
    return z3.Option(z3.Re(z3.StringVal("\n")))
