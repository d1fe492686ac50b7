"""Models of ``io.BytesIO`` and ``io.StringIO`` over the input: reads return symbolic slices.

A stream made over a ``SymBytes``/``SymStr`` answers ``read``, ``readline`` (a scan for the
newline, one branch per character), iteration and ``getvalue`` with parts of it; a seek back
from the end is a branch on the length; writing to it makes it plain (counted).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from typing import Any

from symfence.worker.concolic.symbolic import (
    SymInt,
    all_equal,
    decide,
    fix,
    implicit_branch,
    note_concretised,
    value_of,
)
from symfence.worker.concolic.symseq import SymBytes, SymStr


class _SymStream:
    """Reads of an in-memory stream over a SymBytes/SymStr return symbolic slices (a mixin)."""

    _sym: Any
    _kind = "stream"

    def _plain_now(self, kind: str) -> None:
        if self._sym is not None:
            note_concretised(f"{self._kind}.{kind}")
            self._sym = None

    def read(self, size: Any = -1) -> Any:
        if self._sym is None:
            return super().read(size)  # type: ignore[misc]
        frame = sys._getframe(1)
        size = fix(size, f"{self._kind}.read_size", frame)
        start = super().tell()  # type: ignore[misc]
        super().read(size)  # type: ignore[misc]
        if size is None or size < 0:
            return self._sym._slice(slice(start, None), frame)
        return self._sym._slice(slice(start, start + size), frame)

    read1 = read

    def readline(self, size: Any = -1) -> Any:
        if self._sym is None:
            return super().readline(size)  # type: ignore[misc]
        frame = sys._getframe(1)
        size = fix(size, f"{self._kind}.read_size", frame)
        start = super().tell()  # type: ignore[misc]
        line = super().readline(size)  # type: ignore[misc]
        items = self._sym._items
        n = len(items)
        if start >= n:
            return line
        limit = n if size is None or size < 0 else min(n, start + size)
        p = start
        while p < limit:  # the scan for the newline, one comparison per character
            p += 1
            if decide(all_equal([items[p - 1]], [10]), frame):
                break
        else:
            if limit == n:
                self._sym._end_branch(frame, n)
        return self._sym._slice(slice(start, p if p < n else None), frame)

    def readlines(self, hint: Any = -1) -> list[Any]:
        lines = []
        total = 0
        while True:
            line = self.readline()
            if not line:
                return lines
            lines.append(line)
            total += len(line)
            if hint is not None and 0 < value_of(hint) <= total:
                return lines

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def getvalue(self) -> Any:
        if self._sym is None:
            return super().getvalue()  # type: ignore[misc]
        return self._sym

    def seek(self, pos: Any, whence: int = 0) -> int:
        pos = fix(pos, f"{self._kind}.seek", sys._getframe(1))
        if self._sym is not None and whence == 2 and isinstance(pos, int) and pos < 0:
            # seeking back from the end needs that many bytes: the length decides (ValueError if not)
            length = self._sym._len
            if isinstance(length, SymInt):
                implicit_branch(sys._getframe(1), length.value + pos >= 0, lambda: (
                    length.term() + pos >= 0, length.deps) if length.expr is not None else None)
        return super().seek(pos, whence)  # type: ignore[misc]

    def write(self, b: Any) -> int:
        self._plain_now("write")
        return super().write(b)  # type: ignore[misc]

    def writelines(self, lines: Any) -> None:
        self._plain_now("write")
        return super().writelines(lines)  # type: ignore[misc]

    def truncate(self, size: Any = None) -> int:
        self._plain_now("truncate")
        return super().truncate(size)  # type: ignore[misc]


class SymBytesIO(_SymStream, io.BytesIO):
    """``io.BytesIO`` over a SymBytes: reads return symbolic slices; writing makes it plain."""

    _kind = "BytesIO"

    def __init__(self, initial_bytes: Any = b"") -> None:
        super().__init__(initial_bytes)
        self._sym: SymBytes | None = initial_bytes if isinstance(initial_bytes, SymBytes) else None

    def readinto(self, b: Any) -> int:
        if self._sym is not None:
            note_concretised("BytesIO.readinto")
        return super().readinto(b)

    def getbuffer(self) -> Any:
        self._plain_now("getbuffer")
        return super().getbuffer()


class SymStringIO(_SymStream, io.StringIO):
    """``io.StringIO`` over a SymStr (newline="\\n", the default: no translation)."""

    _kind = "StringIO"

    def __init__(self, initial_value: Any = "", newline: Any = "\n") -> None:
        super().__init__(initial_value, newline)
        self._sym: SymStr | None = None
        if isinstance(initial_value, SymStr):
            if newline == "\n":
                self._sym = initial_value
            else:
                note_concretised("StringIO.newline")

