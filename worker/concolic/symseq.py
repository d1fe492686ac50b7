"""Symbolic ``bytes`` and ``str``: real bytes/str objects whose items, length and methods stay symbolic.

``SymBytes`` (items: byte values) and ``SymStr`` (items: code points) hold the concrete value
(C code sees exactly the plain program's data) plus a list of items (``SymInt`` or int) and
the tracked length (a ``SymInt`` over the input length, or None). Indexing, slicing,
iteration, comparisons and concatenation are ``seqcore``'s (reaching the end of the input
records ``len > n`` so the search can grow the input); the methods that scan (``find``,
``split``, ``strip``, ``in``, ...) are ``seqscan``'s, each modelled as the Python loop it
stands for. Here: the two concrete types, ``bytes.decode`` (ASCII, Latin-1, UTF-8) giving a
``SymStr`` and ``str.encode`` a ``SymBytes``, ``ord``/``chr``, ``join`` (``sym_join``: a plain or
symbolic separator, symbolic parts); every other method works on the concrete value and counts
a concretisation (``bytes.<method>`` / ``str.<method>``).
"""
from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator
from typing import Any

from symfence.worker.concolic.seqcore import _active, _Seq
from symfence.worker.concolic.seqscan import _Scans
from symfence.worker.concolic.symbolic import SymInt, note_concretised, ranges_of, value_of

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


class SymBytes(_Scans, bytes):
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
        note_concretised("bytes.convert")
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
        note_concretised(f"bytes.decode.{name}".replace("-", "_"))
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

    def join(self, parts: Any) -> Any:  # type: ignore[override]
        return sym_join(self, parts)


# ---------------------------------------------------------------------------------------------
# str


def _str_items(other: object) -> list[Any] | None:
    if isinstance(other, SymStr):
        return other._items
    if isinstance(other, str):
        return [ord(c) for c in other]
    return None


class SymStr(_Scans, str):
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
        """``str(x)``, ``format(x)`` and an alias's call (``unicode = str``) of symbolic text: the
        text itself, as ``str(s)`` of a plain str is ``s`` (a plain copy before: the engine
        recorded no branch after pyjsparser's ``unicode(code)`` and counted nothing); of a ``str``
        subclass's instance, a SymStr of its items, as ``str``'s is a plain str."""
        return self if type(self) is SymStr else self._copy_as(SymStr)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return str, (self._plain(),)

    def __hash__(self) -> int:
        note_concretised("hash")
        return hash(self._plain())

    def __iter__(self) -> Iterator[Any]:
        return self._iterate()

    def join(self, parts: Any) -> Any:  # type: ignore[override]
        return sym_join(self, parts)

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
        note_concretised(f"str.encode.{name}".replace("-", "_"))
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
        if not any(_name in klass.__dict__ for klass in (_cls, _Scans, _Seq)):
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


def sym_join(sep: Any, parts: Any) -> Any:
    """``sep.join(parts)`` for a ``str``/``bytes`` separator, plain or symbolic: when the
    separator or a part is symbolic, a SymStr/SymBytes whose items are the parts' and the
    separators' items in order (``"".join(chunks)`` of scanned text stays input). Its length is
    concrete; if it is one contiguous run of the input, it knows where (``_base``)."""
    if not isinstance(sep, (str, bytes)):
        return sep.join(parts)  # bytearray, os.path, ...: their own join
    parts = list(parts)
    plain_sep = sep._plain() if isinstance(sep, (SymStr, SymBytes)) else sep
    plain = plain_sep.join([p._plain() if isinstance(p, (SymStr, SymBytes)) else p
                            for p in parts])  # the real TypeError for a wrong item
    if not isinstance(sep, (SymStr, SymBytes)) and not any(isinstance(p, (SymStr, SymBytes))
                                                           for p in parts):
        return plain
    kind: Any = SymStr if isinstance(sep, str) else SymBytes
    sep_items = kind._other_items(sep)
    items: list[Any] = []
    for i, part in enumerate(parts):
        if i:
            items.extend(sep_items)
        items.extend(kind._other_items(part))
    result = kind(plain, items, None, False)
    result._base = _contiguous_base(parts) if not sep_items else None
    return result


def _contiguous_base(parts: list[Any]) -> int | None:
    """Where in the input the parts lie if they are one contiguous run of it, else None."""
    base = None
    end = None
    for part in parts:
        if not isinstance(part, (SymStr, SymBytes)) or part._base is None:
            if len(part):
                return None
            continue
        if end is not None and part._base != end:
            return None
        base = part._base if base is None else base
        end = part._base + len(part._items)
    return base
