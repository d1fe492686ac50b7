"""The model of ``struct``: integer, bool and bytes fields unpacked from symbolic bytes stay symbolic.

``unpack``, ``unpack_from``, ``iter_unpack`` and ``Struct`` read the format's layout and build
each field from the items it covers (``models.from_items``); the buffer's length check is a
branch, so a short buffer's ``struct.error`` is a path too. Other field kinds are concrete
(counted as ``struct.<code>``).
"""

from __future__ import annotations

import struct as _struct
import sys
from collections.abc import Iterator
from typing import Any

from symfence.worker.concolic.models import from_items
from symfence.worker.concolic.symbolic import (
    SymBool,
    SymInt,
    any_true,
    fix,
    implicit_branch,
    note_concretised,
)
from symfence.worker.concolic.symseq import SymBytes

_INT_CODES = set("bBhHiIlLqQnN")
_ORDERS = {"<": "little", ">": "big", "!": "big", "=": sys.byteorder, "@": sys.byteorder}


def _layout(fmt: Any) -> tuple[str, list[tuple[str, int, int]]]:
    """(byte order, [(code, offset, size)]) of a format; 's' fields carry their length."""
    text = fmt.decode("ascii") if isinstance(fmt, bytes) else fmt
    text = "".join(text.split())
    order = text[0] if text and text[0] in _ORDERS else "@"
    body = text[1:] if text and text[0] in "<>!=@" else text
    prefix = text[0] if text and text[0] in "<>!=@" else ""
    fields: list[tuple[str, int, int]] = []
    done = prefix
    count = ""
    for ch in body:
        if ch.isdigit():
            count += ch
            continue
        repeat = int(count) if count else 1
        count = ""
        if ch in "sp":
            end = _struct.calcsize(done + f"{repeat}{ch}")
            fields.append((ch, end - repeat, repeat))
            done += f"{repeat}{ch}"
            continue
        for _ in range(repeat):
            end = _struct.calcsize(done + ch)
            size = _struct.calcsize(prefix + ch) if prefix else _struct.calcsize("@" + ch)
            if ch != "x":
                fields.append((ch, end - size, size))
            done += ch
    return _ORDERS[order], fields


def _unpack_items(fmt: Any, items: list[Any], concrete: tuple[Any, ...]) -> tuple[Any, ...]:
    byteorder, fields = _layout(fmt)
    out: list[Any] = []
    for (code, offset, size), value in zip(fields, concrete):
        chunk = items[offset:offset + size]
        if not any(isinstance(x, SymInt) for x in chunk):
            out.append(value)
        elif code in _INT_CODES:
            out.append(from_items(chunk, byteorder, code.islower()))
        elif code == "?":
            tests = [x != 0 for x in chunk]
            test = any_true(tests, value)
            out.append(test if isinstance(test, SymBool) else value)
        elif code in "sc":
            out.append(SymBytes(value, list(chunk), None, False))
        else:
            note_concretised(f"struct.{code}")
            out.append(value)
    return tuple(out)


def _plain_buffer(buffer: Any) -> Any:
    return buffer._plain() if isinstance(buffer, SymBytes) else buffer


def _length_is(buffer: SymBytes, size: int, exact: bool, offset: int, frame: Any) -> None:
    length = buffer._len
    if not isinstance(length, SymInt):
        return
    taken = (length.value == offset + size) if exact else (length.value >= offset + size)
    implicit_branch(frame, taken, lambda: (
        (length.term() == offset + size) if exact else (length.term() >= offset + size),
        length.deps) if length.expr is not None else None)


def unpack(fmt: Any, buffer: Any) -> tuple[Any, ...]:
    """``struct.unpack`` whose integer, bool and bytes fields of a SymBytes stay symbolic."""
    if isinstance(buffer, SymBytes):  # the length check first: a short buffer's struct.error is a path too
        _length_is(buffer, _struct.calcsize(fmt), True, 0, sys._getframe(1))
    concrete = _struct.unpack(fmt, _plain_buffer(buffer))
    if not isinstance(buffer, SymBytes):
        return concrete
    return _unpack_items(fmt, buffer._items, concrete)


def unpack_from(fmt: Any, buffer: Any, offset: Any = 0) -> tuple[Any, ...]:
    offset = fix(offset, "struct.offset", sys._getframe(1))
    size = _struct.calcsize(fmt)
    if isinstance(buffer, SymBytes) and offset >= 0:
        _length_is(buffer, size, False, offset, sys._getframe(1))
    concrete = _struct.unpack_from(fmt, _plain_buffer(buffer), offset)
    if not isinstance(buffer, SymBytes) or offset < 0:
        return concrete
    return _unpack_items(fmt, buffer._items[offset:offset + size], concrete)


def iter_unpack(fmt: Any, buffer: Any) -> Iterator[tuple[Any, ...]]:
    concrete = list(_struct.iter_unpack(fmt, _plain_buffer(buffer)))
    if not isinstance(buffer, SymBytes):
        yield from concrete
        return
    size = _struct.calcsize(fmt)
    for i, values in enumerate(concrete):
        yield _unpack_items(fmt, buffer._items[i * size:(i + 1) * size], values)


class Struct(_struct.Struct):
    """``struct.Struct`` with the symbolic ``unpack``, ``unpack_from`` and ``iter_unpack``."""

    def unpack(self, buffer: Any) -> tuple[Any, ...]:
        if isinstance(buffer, SymBytes):
            _length_is(buffer, self.size, True, 0, sys._getframe(1))
        concrete = super().unpack(_plain_buffer(buffer))
        if not isinstance(buffer, SymBytes):
            return concrete
        return _unpack_items(self.format, buffer._items, concrete)

    def unpack_from(self, buffer: Any, offset: Any = 0) -> tuple[Any, ...]:
        offset = fix(offset, "struct.offset", sys._getframe(1))
        if isinstance(buffer, SymBytes) and offset >= 0:
            _length_is(buffer, self.size, False, offset, sys._getframe(1))
        concrete = super().unpack_from(_plain_buffer(buffer), offset)
        if not isinstance(buffer, SymBytes) or offset < 0:
            return concrete
        return _unpack_items(self.format, buffer._items[offset:offset + self.size], concrete)

    def iter_unpack(self, buffer: Any) -> Iterator[tuple[Any, ...]]:
        return iter_unpack(self.format, buffer)

