"""``memoryview`` of symbolic bytes: a view that keeps the bytes' items, for rewritten code.

``memoryview(data)`` copies nothing, but the view is a C object: the input left the engine there
(hyperframe parses its frame header from ``memoryview(data[:9])`` with ``struct``: no branch at
all). In rewritten modules a call ``memoryview(x)`` is ``sym_memoryview(x)`` (instrument.py; the
name stays the type, for ``isinstance`` and ``is``): of a ``SymBytes``
it gives a ``SymMemoryView``, bytes with the view's own methods (``tobytes``, ``tolist``,
``cast('B')``, ``release``, ``nbytes``, ``obj``, ...) whose slices are views again; ``type(v)`` and
``isinstance`` in rewritten code answer as for a real memoryview (models.py). Of anything else,
the real ``memoryview``.
"""

from __future__ import annotations

from typing import Any

from symfence.worker.concolic.symbolic import SymInt
from symfence.worker.concolic.symseq import SymBytes


class SymMemoryView(SymBytes):
    """A read-only, one-dimensional, format ``B`` view of symbolic bytes."""

    _obj: Any = None

    @classmethod
    def _make(cls, items: list[Any], length: SymInt | None, open_end: bool) -> SymMemoryView:
        plain = SymBytes._make(items, length, open_end)
        return SymMemoryView._of(plain, plain)

    @classmethod
    def _of(cls, data: SymBytes, obj: Any) -> SymMemoryView:
        view = SymBytes.__new__(cls, data._plain(), data._items, data._len, data._open)
        view._base = data._base
        view._obj = obj
        return view

    def tobytes(self, order: str | None = None) -> SymBytes:
        return self._copy_as(SymBytes)

    def tolist(self) -> list[Any]:
        return list(self._items)

    def cast(self, fmt: str, shape: Any = None) -> Any:
        if fmt == "B" and shape is None:
            return self
        return memoryview(self._plain()).cast(fmt, *(() if shape is None else (shape,)))

    def toreadonly(self) -> SymMemoryView:
        return self

    def release(self) -> None:
        pass

    def __enter__(self) -> SymMemoryView:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    @property
    def obj(self) -> Any:
        return self._obj

    @property
    def nbytes(self) -> int:
        return len(self._items)

    readonly = True
    format = "B"
    itemsize = 1
    ndim = 1
    contiguous = c_contiguous = f_contiguous = True

    @property
    def shape(self) -> tuple[int]:
        return (len(self._items),)

    @property
    def strides(self) -> tuple[int]:
        return (1,)


def sym_memoryview(obj: Any) -> Any:
    """``memoryview(obj)`` in rewritten code: a ``SymMemoryView`` of symbolic bytes, else the real one."""
    if isinstance(obj, SymMemoryView):
        return SymMemoryView._of(obj, obj._obj)
    if isinstance(obj, SymBytes):
        return SymMemoryView._of(obj, obj)
    return memoryview(obj)
