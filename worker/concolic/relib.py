"""The ``re`` an instrumented module imports: matching on symbolic text is a branch in z3's regex theory, groups stay symbolic.

``match``, ``fullmatch``, ``search`` and ``split`` (module functions and the methods of a
compiled pattern, ``pos``/``endpos`` included) on a ``SymStr``/``SymBytes`` run the real ``re``
for the result, and record one implicit branch "the text is in the pattern's language"
(``retheory``: ``InRe`` over the text's characters), so negating it makes the solver write text
that matches (or stops matching). When the text runs to the end of the input, its length is
part of the condition: the text as it is, or as long as the pattern needs (up to ``_GROW``
characters longer; as short as a fullmatch allows), so a pattern may ask for a longer or shorter text. Each pattern gets its own site at a call site (a lexer trying many patterns at
one line). A match's groups, and the pieces ``split`` returns, are slices of the symbolic text
at the concrete match's spans, so later tests on them (``int(m.group(1)) == 418``) are followed.

A pattern outside the translated subset still returns symbolic groups and pieces but records
no branch: counted as ``re.<reason>`` (``re.groupref``, ``re.assert_not``, ...). ``findall``,
``finditer``, ``sub`` and ``subn`` on symbolic text use the real ``re`` and count
``c_re.<function>``. Matching never raises because of the engine: anything unexpected while
building the condition is counted (``re.model_error``) and the plain result returned.
"""

from __future__ import annotations

import re as _re
import sys
import types
import zlib
from typing import Any, Callable

import z3

from symfence.worker.concolic import symbolic as _sym
from symfence.worker.concolic.importhook import _counting
from symfence.worker.concolic.retheory import (
    MAX_CHAR,
    Translation,
    Unsupported,
    any_string,
    newline_or_nothing,
    domain_for,
    literal_of,
    translate,
)
from symfence.worker.concolic.symbolic import SymInt, implicit_branch, note_concretised, value_of
from symfence.worker.concolic.symseq import SymBytes, SymStr

_GROW = 16  # characters a text running to the end of the input may grow by for a pattern
_STEPS = (1, 4)  # and the longer texts always offered (within the pattern's widths)
_MODES = ("match", "fullmatch", "search")
# Beyond these, z3's sequence solver was seen to run minutes past the query time-out (the
# email_validator and sqlparse harnesses): such a place is counted (re.long_text /
# re.large_pattern) and not followed.
_MAX_TEXT = 64
_MAX_PATTERN = 100
_PROXIES = (SymStr, SymBytes)


def _symbolic(text: Any) -> bool:
    """Whether ``text`` is a proxy with input-derived items or length (the same in trace and
    symbolic runs: never decided by whether a term exists). Kept on the text: a lexer asks
    for every pattern at every position."""
    if not isinstance(text, _PROXIES):
        return False
    known = text.__dict__.get("_re_symbolic")
    if known is None:
        known = text._re_symbolic = (any(isinstance(x, SymInt) for x in text._items)
                                     or (text._open and isinstance(text._len, SymInt)))
    return bool(known)


def _salt(pattern: Any) -> int:
    raw = pattern.pattern if isinstance(pattern.pattern, bytes) else pattern.pattern.encode("utf-8", "replace")
    return (zlib.crc32(raw + pattern.flags.to_bytes(4, "little")) & 0xFFFF) | 1


def _span(n: int, pos: int, endpos: int | None) -> tuple[int, int]:
    pos = min(max(pos, 0), n)
    end = n if endpos is None else min(max(endpos, 0), n)
    return pos, max(end, pos)


def _seq(text: Any, start: int, stop: int, extra: int) -> tuple[z3.SeqRef, int]:
    """The characters ``start .. stop`` of ``text`` as a z3 string, plus ``extra`` phantoms past
    its end (the input bytes a longer input would have), and its deps. No range guards: the
    classes are cut to the text's domain, so a character the solver picks outside it never
    matches (at worst a divergence, never a wrong path condition; a guard in the condition
    could be negated instead of the match)."""
    parts: list[z3.SeqRef] = []
    deps = 0
    run: list[str] = []

    def flush() -> None:
        if run:
            parts.append(z3.StringVal("".join(run)))
            run.clear()

    items = list(text._items[start:stop])
    if extra > 0:
        items.extend(text._phantoms(len(text._items), extra) or [])
    for item in items:
        if isinstance(item, SymInt) and item.expr is not None:
            flush()
            parts.append(z3.Unit(z3.CharFromBv(z3.Extract(17, 0, item.term()))))
            deps |= item.deps
        else:
            run.append(chr(value_of(item)))
    flush()
    if not parts:
        return z3.StringVal(""), deps
    return (parts[0] if len(parts) == 1 else z3.Concat(*parts)), deps


def _lengths(t: Translation, size: int, mode: str, can_grow: bool) -> list[int]:
    """The lengths of the text (its part from ``pos``) the condition offers besides its own:
    the shortest a match needs if it is shorter, the longest a fullmatch allows if it is
    longer, and a few steps longer (``_STEPS``) within the pattern's widths if the input can
    grow; each is one fixed-length membership for z3."""
    others: list[int] = []
    if size < t.shortest:
        if can_grow and t.shortest - size <= _GROW:
            others.append(t.shortest)
    elif mode == "fullmatch" and size > t.longest:
        others.append(t.longest)
    if can_grow:
        others += [size + step for step in _STEPS
                   if max(size, t.shortest) < size + step <= t.longest and size + step not in others]
    return others


def _condition(pattern: Any, text: Any, pos: int, endpos: int | None, mode: str) -> tuple[z3.BoolRef, int]:
    """``text[pos:endpos]`` is matched by ``pattern`` in ``mode`` (match / fullmatch / search).

    A text that ends where the input ends: if the language is closed under extension (match
    or search without ``$``), ``n`` characters in it (true for every longer input too) or
    the text at one of ``_lengths``; otherwise ``len == n and (n characters in it)`` or
    ``len == k and (k characters in it)`` for each ``k`` of ``_lengths``. Fixed-length
    memberships are decided by z3 in milliseconds; a symbolic length (``str.substr``) takes
    it seconds."""
    n = len(text._items)
    start, stop = _span(n, value_of(pos), None if endpos is None else value_of(endpos))
    values = {value_of(x) for x in text._items}
    if values and max(values) > MAX_CHAR:
        raise Unsupported("char_beyond_z3")
    domain = domain_for(values)
    t = translate(pattern.pattern, pattern.flags, domain)
    if t.at_start and start > 0:
        raise Unsupported("anchor_after_pos")
    if mode == "fullmatch":
        language = t.body
    else:
        tail = {"": any_string(domain), "$": newline_or_nothing(), "Z": z3.Re(z3.StringVal(""))}[t.at_end]
        language = z3.Concat(t.body, tail)
        if mode == "search" and not t.at_start:
            language = z3.Concat(any_string(domain), language)
    seq, deps = _seq(text, start, stop, 0)
    cond = z3.InRe(seq, language)
    length = text._len
    if not ((endpos is None or endpos >= n) and text._open and isinstance(length, SymInt)
            and length.expr is not None):
        return cond, deps
    closed = mode != "fullmatch" and t.at_end == ""
    ln = length.term()
    options = [cond if closed else z3.And(ln == n, cond)]
    for other in _lengths(t, stop - start, mode, text._base is not None):
        if other > stop - start:
            other_seq, other_deps = _seq(text, start, stop, other - (stop - start))
        else:
            other_seq, other_deps = _seq(text, start, start + other, 0)
        options.append(z3.And(ln == start + other, z3.InRe(other_seq, language)))
        deps |= other_deps
    return (options[0] if len(options) == 1 else z3.Or(*options)), deps | length.deps


def _decide(frame: Any, pattern: Any, text: Any, pos: int, endpos: int | None, mode: str,
            taken: bool, match: Any = None) -> None:
    """Record the branch "``text`` matches in ``mode``" (or count why it cannot be)."""
    if not _symbolic(text) or _sym._active is None:
        return
    if len(text._items) - value_of(pos) > _MAX_TEXT:
        note_concretised("re.long_text")
        return
    if len(pattern.pattern) > _MAX_PATTERN:
        note_concretised("re.large_pattern")
        return
    try:
        translate(pattern.pattern, pattern.flags, ((0, 0x7F),))
    except Unsupported as exc:
        note_concretised(f"re.{exc.reason}")
        return
    except (_re.error, RecursionError):
        note_concretised("re.model_error")
        return

    def build() -> tuple[z3.BoolRef, int] | None:
        try:
            return _condition(pattern, text, pos, endpos, mode)
        except Unsupported as exc:
            note_concretised(f"re.{exc.reason}")
        except (z3.Z3Exception, RecursionError, ValueError):
            note_concretised("re.model_error")
        return None

    rec = _sym._active
    before = len(rec.sites)
    implicit_branch(frame, taken, build, salt=_salt(pattern))
    if rec.symbolic and len(rec.sites) > before and rec.conds[-1] is not None:
        rec.strings.add(before)  # its queries get more solver time (engine)
        if match is not None and match.re.groups:
            # what the groups hold is not in the branch's direction: the engine's query memo
            # must tell apart two paths whose groups differ (a JSON key "" and "cmd")
            rec.states[before] = hash(match.groups())


def _piece(text: Any, start: int, stop: int) -> Any:
    return None if start < 0 else text[start:stop]


def _plain(piece: Any) -> Any:
    return piece._plain() if isinstance(piece, _PROXIES) else piece


class SymMatch:
    """A ``re.Match`` whose groups are slices of the symbolic text (spans of the real match)."""

    def __init__(self, match: Any, text: Any) -> None:
        self._match = match
        self._text = text

    @property
    def __class__(self) -> type:  # type: ignore[override]  # isinstance(m, re.Match) holds
        return _re.Match

    def _group(self, index: Any, default: Any = None) -> Any:
        start, stop = self._match.span(index)
        return default if start < 0 else _piece(self._text, start, stop)

    def group(self, *indices: Any) -> Any:
        if not indices:
            return self._group(0)
        if len(indices) == 1:
            return self._group(indices[0])
        return tuple(self._group(i) for i in indices)

    def __getitem__(self, index: Any) -> Any:
        return self._group(index)

    def groups(self, default: Any = None) -> tuple[Any, ...]:
        return tuple(self._group(i, default) for i in range(1, self._match.re.groups + 1))

    def groupdict(self, default: Any = None) -> dict[str, Any]:
        return {name: self._group(name, default) for name in self._match.re.groupindex}

    @property
    def string(self) -> Any:
        return self._text

    def __getattr__(self, name: str) -> Any:
        return getattr(self._match, name)

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return repr(self._match)


def _wrap(match: Any, text: Any) -> Any:
    return SymMatch(match, text) if match is not None and _symbolic(text) else match


def _split(pattern: Any, text: Any, maxsplit: int, frame: Any) -> list[Any]:
    plain = pattern.split(text, maxsplit)
    if not _symbolic(text):
        return plain
    separator = literal_of(pattern.pattern, pattern.flags)
    if separator:  # a plain separator: the modelled str/bytes.split scans it position by position
        return text.split(separator, maxsplit or -1)
    _decide(frame, pattern, text, 0, None, "search", pattern.search(text) is not None)
    pieces: list[Any] = []
    last = 0
    for count, m in enumerate(pattern.finditer(text)):
        if maxsplit and count >= maxsplit:
            break
        pieces.append(_piece(text, last, m.start()))
        pieces.extend(_piece(text, *m.span(i)) for i in range(1, pattern.groups + 1))
        last = m.end()
    pieces.append(_piece(text, last, len(text)))
    if [_plain(p) for p in pieces] != plain:  # rebuilt differently: keep re's
        note_concretised("re.split_rebuild")
        return plain
    return pieces


class SymPattern:
    """A compiled pattern whose matching methods follow symbolic text (see the module doc)."""

    def __init__(self, pattern: Any) -> None:
        self._pattern = pattern

    @property
    def __class__(self) -> type:  # type: ignore[override]  # isinstance(p, re.Pattern) holds
        return _re.Pattern

    def _run(self, mode: str, text: Any, pos: int, endpos: int | None, frame: Any) -> Any:
        real = getattr(self._pattern, mode)
        match = real(text, pos) if endpos is None else real(text, pos, endpos)
        _decide(frame, self._pattern, text, pos, endpos, mode, match is not None, match)
        return _wrap(match, text)

    def match(self, string: Any, pos: int = 0, endpos: int | None = None) -> Any:
        return self._run("match", string, pos, endpos, sys._getframe(1))

    def fullmatch(self, string: Any, pos: int = 0, endpos: int | None = None) -> Any:
        return self._run("fullmatch", string, pos, endpos, sys._getframe(1))

    def search(self, string: Any, pos: int = 0, endpos: int | None = None) -> Any:
        return self._run("search", string, pos, endpos, sys._getframe(1))

    def split(self, string: Any, maxsplit: int = 0) -> list[Any]:
        return _split(self._pattern, string, maxsplit, sys._getframe(1))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._pattern, name)
        if name in ("findall", "finditer", "sub", "subn"):
            return _counting(attr, f"c_re.Pattern.{name}")
        return attr

    def __repr__(self) -> str:
        return repr(self._pattern)

    def __eq__(self, other: object) -> bool:
        return self._pattern == getattr(other, "_pattern", other)

    def __hash__(self) -> int:
        return hash(self._pattern)

    def __copy__(self) -> SymPattern:
        return self

    def __deepcopy__(self, memo: Any) -> SymPattern:
        return self


def _real(pattern: Any, flags: int) -> Any:
    if isinstance(pattern, SymPattern):
        pattern = pattern._pattern
    if isinstance(pattern, _PROXIES):  # a pattern built from the input: its plain text
        note_concretised("re.symbolic_pattern")
        pattern = pattern._plain()
    return _re.compile(pattern, flags)


def compile(pattern: Any, flags: int = 0) -> SymPattern:  # noqa: A001 - re's name
    return SymPattern(_real(pattern, flags))


def match(pattern: Any, string: Any, flags: int = 0) -> Any:
    return SymPattern(_real(pattern, flags))._run("match", string, 0, None, sys._getframe(1))


def fullmatch(pattern: Any, string: Any, flags: int = 0) -> Any:
    return SymPattern(_real(pattern, flags))._run("fullmatch", string, 0, None, sys._getframe(1))


def search(pattern: Any, string: Any, flags: int = 0) -> Any:
    return SymPattern(_real(pattern, flags))._run("search", string, 0, None, sys._getframe(1))


def split(pattern: Any, string: Any, maxsplit: int = 0, flags: int = 0) -> list[Any]:
    return _split(_real(pattern, flags), string, maxsplit, sys._getframe(1))


def re_model(module: types.ModuleType, copy: Callable[[types.ModuleType], types.ModuleType]) -> types.ModuleType:
    """The model of ``re`` (a copy of ``module`` made by ``copy``) for instrumented modules."""
    model = copy(module)
    for name, fn in (("compile", compile), ("match", match), ("fullmatch", fullmatch),
                     ("search", search), ("split", split)):
        setattr(model, name, fn)
    for name in ("findall", "finditer", "sub", "subn"):
        setattr(model, name, _counting(getattr(_re, name), f"c_re.{name}"))
    return model
