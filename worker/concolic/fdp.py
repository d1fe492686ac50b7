"""A pure-Python ``atheris.FuzzedDataProvider``: its exact values, symbolic where input bytes decide them.

Instrumented code that imports ``atheris`` gets this class in place of the C one (``importhook``),
so an Atheris harness run by the concolic engine splits the input exactly as under libFuzzer
(an input the engine solves means the same to the fuzz stage and to a plain replay), and the
values it hands out carry the input's terms:

- bytes are taken from the front (``ConsumeBytes``, ``ConsumeInt``/``UInt`` little-endian
  two's complement, ``ConsumeProbability``, the type byte of ``ConsumeFloat``, the spec byte of
  ``ConsumeUnicode``, ``ConsumeBool``'s low bit); ``ConsumeIntInRange`` and
  ``PickValueInList`` take theirs from the back, big-endian in reading order, then ``% (range
  + 1)`` (atheris' ``ConsumeSmallIntInRange``); a range wider than 64 bits is ``min +
  ConsumeInt(bits // 8) % (range + 1)``;
- ``ConsumeUnicode`` is ASCII (bytes ``& 0x7f``) when the spec byte is odd, else UTF-16
  (little-endian code units) when bit 1 is set, else 21-bit code points from 4 bytes (bit
  0x100000 clears 0x0f0000); ``NoSurrogates`` maps 0xd800-0xdfff down by 0xd800. The choice of
  variant is one implicit branch at the caller, so the engine can ask for another;
- ints, bools and characters are ``SymInt``/``SymBool``/``SymStr`` items; floats are concrete
  (the engine does not model floating point); ``remaining_bytes()`` is a ``SymInt`` over the
  input length;
- a read that wants more bytes than are left records an end-of-input branch (``len >= n + k``),
  so the search grows the input; a read that takes everything up to the end of the input keeps
  the input's open end (a scan past its end grows the input, as for the input itself).

Argument errors are those of the real provider: each call's arguments are checked first by
the C implementation on an empty buffer.
"""

from __future__ import annotations

import sys
from typing import Any

import atheris
import z3

from symfence.worker.concolic.recorder import LENGTH_BIT
from symfence.worker.concolic.symbolic import (
    WIDTH,
    SymBool,
    SymInt,
    fix,
    implicit_branch,
    note_concretised,
    value_of,
)
from symfence.worker.concolic.seqcore import _min
from symfence.worker.concolic.symseq import SymBytes, SymStr

_REAL = atheris.FuzzedDataProvider
_UINT64_MAX = (1 << 64) - 1
_PROBABILITY_DIVISOR = float(_UINT64_MAX)  # C's static_cast<double>(UINT64_MAX) = 2**64
_DBL_MAX = sys.float_info.max
_DBL_MIN = sys.float_info.min
_DENORM_MIN = 5e-324
_SPECIAL_FLOATS = (0.0, -0.0, float("inf"), float("-inf"), float("nan"), _DENORM_MIN, -_DENORM_MIN,
                   _DBL_MIN, -_DBL_MIN, _DBL_MAX, -_DBL_MAX)
_MAX_GROWTH = 64  # an end-of-input branch asks for at most this many more bytes
_BACK_SHRINK = 16  # a byte read from the back follows inputs this much shorter (and _MAX_GROWTH longer)


def _checker() -> Any:
    return _REAL(b"")


def _count(x: Any, frame: Any) -> int:
    """A count or size argument: a value decided by input bytes is fixed (a branch), one that
    depends only on the input length (``remaining_bytes()``) is used as it is."""
    if isinstance(x, SymInt):
        if x.deps & ~LENGTH_BIT:
            return fix(x, "fdp.count", frame)
        return x.value
    return x


def _derived(value: int, sources: list[Any], build: Any, width: int = WIDTH) -> Any:
    """A value computed from ``sources``: plain if none is a proxy, else a SymInt whose term
    ``build()`` makes (none in trace mode)."""
    proxies = [s for s in sources if isinstance(s, SymInt)]
    if not proxies:
        return value
    deps = 0
    for s in proxies:
        deps |= s.deps
    if any(s.expr is None for s in proxies):  # the plain run: its deps too (`_count`)
        return SymInt(value, None, deps)
    return SymInt(value, build(), deps, width)


def _term(x: Any) -> Any:
    return x.term() if isinstance(x, SymInt) else z3.BitVecVal(x, WIDTH)


def _join(items: list[Any], little: bool, signed: bool) -> Any:
    """``int.from_bytes`` of byte items (plain or SymInt)."""
    from symfence.worker.concolic.models import from_items

    return from_items(items, "little" if little else "big", signed)


def _narrow(x: Any) -> Any:
    """A SymInt narrowed to 64 bits when its value allows (code units, code points)."""
    if isinstance(x, SymInt) and x.expr is not None and x.width > WIDTH:
        return SymInt(x.value, z3.Extract(WIDTH - 1, 0, x.term()), x.deps, WIDTH)
    return x


class FuzzedDataProvider:
    """The model of ``atheris.FuzzedDataProvider`` (same methods, arguments, values and errors)."""

    def __init__(self, data: Any) -> None:
        if not isinstance(data, bytes):
            _REAL(data)  # the real TypeError
            raise TypeError(f"FuzzedDataProvider needs bytes, not {type(data).__name__}")
        if isinstance(data, SymBytes):
            self._items = list(data._items)
            self._length = data._len if isinstance(data._len, SymInt) else None
        else:
            self._items = list(bytes(data))
            self._length = None
        self._data = data
        # where byte 0 sits in the input, if the data runs to the input's end (its length is
        # the input's, less a prefix): then a byte read from the back can follow the length
        self._base = data._base if isinstance(data, SymBytes) and data._open else None
        self._front = 0
        self._back = len(self._items)  # bytes [front, back) are left

    # -- the buffer ---------------------------------------------------------------------------

    def _take_back(self) -> Any:
        """The last byte left, taken. Its term names the byte at that distance from the end of
        an input of any length near this one (an If chain on the length), so an input the
        solver lengthens or shortens still reads the value it solved for there."""
        self._back -= 1
        item = self._items[self._back]
        length, base = self._length, self._base
        if (base is None or length is None or length.expr is None or not isinstance(item, SymInt)
                or item.expr is None):
            return item
        n = len(self._items)
        k = n - 1 - self._back  # bytes after it
        chain, deps, lt = item.term(), item.deps | length.deps, length.term()
        for size in range(max(k + 1, n - _BACK_SHRINK), n + _MAX_GROWTH + 1):
            if size != n:
                j = base + size - 1 - k
                chain = z3.If(lt == size, z3.ZeroExt(WIDTH - 8, z3.BitVec(f"b{j}", 8)), chain)
                deps |= 1 << (j + 1)
        return SymInt(item.value, chain, deps, WIDTH)

    def _remaining(self) -> int:
        return self._back - self._front

    def _grow(self, frame: Any, missing: int) -> None:
        """A read ran ``missing`` bytes past what is left: ``len >= n + missing`` could be true."""
        length = self._length
        if missing <= 0 or length is None:
            return
        n = len(self._items)
        need = n + min(missing, _MAX_GROWTH)
        implicit_branch(frame, False, lambda: (length.term() >= need, length.deps)
                        if length.expr is not None else None, end_of_input=n)

    def _advance(self, count: int) -> None:
        self._front = min(self._front + count, self._back)

    def _front_items(self, count: int) -> list[Any]:
        return self._items[self._front:self._front + count]

    def _reaches_end(self) -> bool:
        """Whether what is left runs to the end of the input (nothing was taken from the back)."""
        return self._back == len(self._items) and self._length is not None

    def _length_of(self, count: int, width: int) -> SymInt | None:
        """``min(count, remaining // width)`` over the input length: a read's length (a shorter
        input cuts it short, which is how a fixed-count string can equal a shorter keyword)."""
        rest = self.remaining_bytes()
        if not isinstance(rest, SymInt):
            return None
        length = _min(count, rest if width == 1 else rest // width)
        return length if isinstance(length, SymInt) else None

    def _open_bytes(self, start: int, frame: Any) -> Any:
        """The input from ``start`` to its end, with its open end (grows with the input)."""
        data = self._data
        if isinstance(data, SymBytes):
            return data._slice(slice(start, None), frame)
        return data[start:]

    # -- bytes and strings --------------------------------------------------------------------

    def ConsumeBytes(self, count: Any) -> Any:
        frame = sys._getframe(1)
        count = _count(count, frame)
        _checker().ConsumeBytes(count)
        left = self._remaining()
        n = min(count, left)
        if n == 0:
            self._grow(frame, count)
            return b""
        start = self._front
        if n == left and self._reaches_end():
            self._advance(n)
            return self._open_bytes(start, frame)
        length = self._length_of(count, 1)
        self._advance(n)
        self._grow(frame, count - left)
        items = self._items[start:start + n]
        if not any(isinstance(x, SymInt) for x in items) and length is None:
            return bytes(items)
        return SymBytes(bytes(value_of(x) for x in items), items, length, False)

    def ConsumeUnicode(self, count: Any) -> Any:
        frame = sys._getframe(1)
        count = _count(count, frame)
        _checker().ConsumeUnicode(count)
        return self._unicode(count, False, frame)

    def ConsumeUnicodeNoSurrogates(self, count: Any) -> Any:
        frame = sys._getframe(1)
        count = _count(count, frame)
        _checker().ConsumeUnicodeNoSurrogates(count)
        return self._unicode(count, True, frame)

    def ConsumeString(self, count: Any) -> Any:
        frame = sys._getframe(1)
        count = _count(count, frame)
        _checker().ConsumeString(count)
        return self._unicode(count, False, frame)

    def _unicode(self, count: int, no_surrogates: bool, frame: Any) -> Any:
        if count == 0:
            return ""
        left = self._remaining()
        if left <= 1:
            self._advance(left)
            self._grow(frame, 2 - left)
            return ""
        spec = self._items[self._front]
        self._advance(1)
        left -= 1
        s = value_of(spec)
        kind = 1 if s & 1 else (2 if s & 2 else 4)
        if isinstance(spec, SymInt):  # which variant: one branch (negated: another variant)
            mask, want = (1, 1) if kind == 1 else (3, 2) if kind == 2 else (3, 0)
            implicit_branch(frame, True, lambda: ((spec.term() & mask) == want, spec.deps)
                            if spec.expr is not None else None)
        start = self._front
        width = kind
        length = self._length_of(count, width)
        if kind == 1:
            n = min(count, left)
            self._advance(n)
            items = [_derived(value_of(x) & 0x7F, [x], lambda x=x: x.term() & 0x7F)
                     for x in self._items[start:start + n]]
            text = "".join(chr(value_of(c)) for c in items)
            if n == left and self._reaches_end():  # runs to the end of the input: open
                base = getattr(self._data, "_base", None)
                result = SymStr(text, items, length, True)
                if base is not None:
                    result._base = base + start
                return result
            self._grow(frame, count - left)
            return self._text(text, items, length)
        taken = min(count * width, left)
        whole = taken - taken % width
        self._advance(taken)
        self._grow(frame, count * width - left)
        chars = []
        for p in range(start, start + whole, width):
            unit = _narrow(_join(self._items[p:p + width], True, False))
            chars.append(self._code_point(unit, width, no_surrogates))
        return self._text("".join(chr(value_of(c)) for c in chars), chars, length)

    @staticmethod
    def _code_point(unit: Any, width: int, no_surrogates: bool) -> Any:
        v = value_of(unit)
        if width == 4:
            v &= 0x1FFFFF
            if v & 0x100000:
                v &= ~0x0F0000
        if no_surrogates and 0xD800 <= v < 0xE000:
            v -= 0xD800

        def build() -> Any:
            t = unit.term()
            if width == 4:
                t = t & 0x1FFFFF
                t = z3.If(t & 0x100000 != 0, t & ~0x0F0000, t)
            if no_surrogates:
                t = z3.If(z3.And(t >= 0xD800, t < 0xE000), t - 0xD800, t)
            return t

        return _derived(v, [unit], build)

    @staticmethod
    def _text(text: str, items: list[Any], length: SymInt | None = None) -> Any:
        if not any(isinstance(x, SymInt) for x in items) and length is None:
            return text
        return SymStr(text, items, length, False)

    def buffer(self) -> Any:
        frame = sys._getframe(1)
        if self._reaches_end():
            return self._open_bytes(self._front, frame)
        items = self._items[self._front:self._back]
        if not any(isinstance(x, SymInt) for x in items):
            return bytes(items)
        return SymBytes(bytes(value_of(x) for x in items), items, None, False)

    def remaining_bytes(self) -> Any:
        left = self._remaining()
        if self._length is None:
            return left
        return self._length - (len(self._items) - left)

    # -- integers -----------------------------------------------------------------------------

    def _int(self, size: int, signed: bool, frame: Any) -> Any:
        left = self._remaining()
        n = min(size, left)
        self._grow(frame, size - left)
        if n == 0:
            return 0
        items = self._front_items(n)
        self._advance(n)
        return _join(items, True, signed)

    def ConsumeInt(self, size: Any) -> Any:
        frame = sys._getframe(1)
        size = _count(size, frame)
        _checker().ConsumeInt(size)
        return self._int(size, True, frame)

    def ConsumeUInt(self, size: Any) -> Any:
        frame = sys._getframe(1)
        size = _count(size, frame)
        _checker().ConsumeUInt(size)
        return self._int(size, False, frame)

    def _small_int(self, bits: int, top: int, frame: Any) -> Any:
        """atheris' ConsumeSmallIntInRange: bytes from the back while ``top >> offset``, then % (top + 1)."""
        taken: list[Any] = []
        offset = 0
        while offset < bits and (top >> offset) > 0:
            if self._remaining() == 0:
                missing, o = 0, offset
                while o < bits and (top >> o) > 0:
                    missing, o = missing + 1, o + 8
                self._grow(frame, missing)
                break
            taken.append(self._take_back())
            offset += 8
        result = _join(taken, False, False) if taken else 0
        if top != _UINT64_MAX:
            result = result % (top + 1)
        return result

    def _int_in_range(self, low: int, high: int, frame: Any) -> Any:
        delta = high - low
        bits = delta.bit_length()
        if bits <= 64:
            return low + self._small_int(bits, delta, frame)
        return low + self._int(bits // 8, True, frame) % (delta + 1)

    def ConsumeIntInRange(self, min: Any, max: Any) -> Any:  # noqa: A002 - atheris' names
        frame = sys._getframe(1)
        low, high = _count(min, frame), _count(max, frame)
        _checker().ConsumeIntInRange(low, high)  # TypeError, or RuntimeError if min > max
        return self._int_in_range(int(low), int(high), frame)

    def ConsumeIntList(self, count: Any, size: Any) -> list[Any]:
        frame = sys._getframe(1)
        count, size = _count(count, frame), _count(size, frame)
        _checker().ConsumeIntList(count, size)
        return [self._int(size, True, frame) for _ in range(count)]

    def ConsumeIntListInRange(self, count: Any, min: Any, max: Any) -> list[Any]:  # noqa: A002
        frame = sys._getframe(1)
        count, low, high = _count(count, frame), _count(min, frame), _count(max, frame)
        _checker().ConsumeIntListInRange(count, low, high)
        return [self._int_in_range(int(low), int(high), frame) for _ in range(count)]

    def ConsumeBool(self) -> Any:
        frame = sys._getframe(1)
        if self._remaining() == 0:
            self._grow(frame, 1)
            return False
        item = self._items[self._front]
        self._advance(1)
        if not isinstance(item, SymInt):
            return bool(item & 1)
        if item.expr is None:
            return SymBool(bool(item.value & 1), 0, None)
        return SymBool(bool(item.value & 1), item.deps, (item.term() & 1) == 1)

    def PickValueInList(self, values: Any) -> Any:
        frame = sys._getframe(1)
        if not isinstance(values, list) or values:
            _checker().PickValueInList(values)  # the real TypeError for a non-list
        size = len(values)
        if size == 0:  # atheris: size - 1 wraps to 2**64 - 1; 1 byte read, then list[i] fails
            self._small_int(8, _UINT64_MAX, frame)
            raise IndexError("list index out of range")
        bits = 8 if size <= 0xFF else 16 if size <= 0xFFFF else 32 if size <= 0xFFFFFFFF else 64
        index = self._small_int(bits, size - 1, frame)
        if not isinstance(index, SymInt):
            return values[index]
        from symfence.worker.concolic.tables import _table_lookup

        return _table_lookup(values, index, frame)

    # -- floats (concrete: their bytes are consumed exactly, their values are not tracked) ----

    def ConsumeProbability(self) -> float:
        return self._probability(sys._getframe(1))

    def _probability(self, frame: Any) -> float:
        n = min(8, self._remaining())
        self._grow(frame, 8 - n)
        items = self._front_items(n)
        self._advance(n)
        if any(isinstance(x, SymInt) for x in items):
            note_concretised("fdp.float")
        integral = int.from_bytes(bytes(value_of(x) for x in items), "little")
        return float(integral) / _PROBABILITY_DIVISOR

    def _bool_plain(self, frame: Any) -> bool:
        if self._remaining() == 0:
            self._grow(frame, 1)
            return False
        item = self._items[self._front]
        self._advance(1)
        if isinstance(item, SymInt):
            note_concretised("fdp.float")
        return bool(value_of(item) & 1)

    def _float_in_range(self, low: float, high: float, frame: Any) -> float:
        result = low
        if low < 0 and high > 0 and low + _DBL_MAX < high:
            span = (high / 2) - (low / 2)
            if self._bool_plain(frame):
                result += span
        else:
            span = high - low
        return result + span * self._probability(frame)

    def ConsumeFloatInRange(self, min: Any, max: Any) -> float:  # noqa: A002
        frame = sys._getframe(1)
        low, high = value_of(min), value_of(max)
        _checker().ConsumeFloatInRange(low, high)
        return self._float_in_range(float(low), float(high), frame)

    def ConsumeRegularFloat(self) -> float:
        return self._float_in_range(-_DBL_MAX, _DBL_MAX, sys._getframe(1))

    def _float(self, frame: Any) -> float:
        if self._remaining() == 0:
            self._grow(frame, 1)
            return 0.0
        kind = self._items[self._front]
        self._advance(1)
        k = value_of(kind)
        if isinstance(kind, SymInt):  # a special value or a regular one: one branch
            implicit_branch(frame, True, lambda: ((kind.term() == k) if k <= 10 else (kind.term() > 10),
                                                  kind.deps) if kind.expr is not None else None)
        if k <= 10:
            self._advance(min(9, self._remaining()))
            return _SPECIAL_FLOATS[k]
        return self._float_in_range(-_DBL_MAX, _DBL_MAX, frame)

    def ConsumeFloat(self) -> float:
        return self._float(sys._getframe(1))

    def ConsumeFloatList(self, count: Any) -> list[float]:
        frame = sys._getframe(1)
        count = _count(count, frame)
        _checker().ConsumeFloatList(count)
        return [self._float(frame) for _ in range(count)]

    def ConsumeRegularFloatList(self, count: Any) -> list[float]:
        frame = sys._getframe(1)
        count = _count(count, frame)
        _checker().ConsumeRegularFloatList(count)
        return [self._float_in_range(-_DBL_MAX, _DBL_MAX, frame) for _ in range(count)]

    def ConsumeProbabilityList(self, count: Any) -> list[float]:
        frame = sys._getframe(1)
        count = _count(count, frame)
        _checker().ConsumeProbabilityList(count)
        return [self._probability(frame) for _ in range(count)]

    def ConsumeFloatListInRange(self, count: Any, min: Any, max: Any) -> list[float]:  # noqa: A002
        frame = sys._getframe(1)
        count, low, high = _count(count, frame), value_of(min), value_of(max)
        _checker().ConsumeFloatListInRange(count, low, high)
        return [self._float_in_range(float(low), float(high), frame) for _ in range(count)]
