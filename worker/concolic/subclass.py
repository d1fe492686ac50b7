"""Classes of instrumented code that derive from ``str`` or ``bytes`` keep a symbolic value symbolic.

``class Source(str)`` (tomlkit's parser input), ``class Markup(str)``, ``class BaseHeader(str)``:
building one from the input with ``str``'s own constructor copies the characters in C, and the
input is plain from there on, with no branch and no concretisation counted (tomlkit's engine runs
recorded none at all). So in the modules the engine rewrites, ``class X(str)`` derives from
``SymStrSubclass`` instead (``bytes``: ``SymBytesSubclass``; ``sym_build_class`` is those modules'
``__build_class__``, importhook.py): an instance built from a ``SymStr`` (``Source(text)``,
``super().__new__(cls, text)``) keeps its items and length, one built from a plain value is a
SymStr of constants, and ``str.__new__(cls, x)`` called by name gets its items from its own
characters on first use. Instances are still instances of the class, of ``str`` and of nothing
the program can tell apart (``type(x)`` is the class); methods of ``str`` return what they return
on a ``SymStr`` (a ``SymStr`` or ``str``), as ``str``'s return ``str``. A class with a metaclass
of its own (``Enum``) or a generic base keeps its bases as written.
"""

from __future__ import annotations

import builtins
import copyreg
from typing import Any

from symfence.worker.concolic.models import sym_int
from symfence.worker.concolic.symbolic import WIDTH, SymInt
from symfence.worker.concolic.symseq import SymBytes, SymStr

_FIELDS = ("_items", "_len", "_open")


def _field(name: str) -> property:
    """``_items``/``_len``/``_open`` of an instance: what its construction set, else its own
    characters, constant (an instance made by ``str.__new__(cls, x)`` has none set)."""
    key = "_sf" + name

    def get(self: Any) -> Any:
        d = self.__dict__
        if key not in d:
            d["_sf_items"] = self._constant_items()
            d["_sf_len"], d["_sf_open"] = None, False
        return d[key]

    def set_(self: Any, value: Any) -> None:
        self.__dict__[key] = value

    return property(get, set_)


class _Subclass:
    """The part both adapters share: construction, the constant fields, hash and copy."""

    _sym: Any  # SymStr or SymBytes
    _plain_type: type
    _items = _field("_items")
    _len = _field("_len")
    _open = _field("_open")

    def _constant_items(self) -> list[Any]:
        raise NotImplementedError

    @classmethod
    def _adopt(cls, value: Any) -> Any:
        return cls._sym.__new__(cls, value._plain(), list(value._items), value._len, value._open)

    def __hash__(self) -> int:
        if any(isinstance(x, SymInt) for x in self._items):
            return self._sym.__hash__(self)  # counted, as a SymStr's
        return self._plain_type.__hash__(self)

    def __reduce__(self) -> Any:
        """Copy and pickle as the class with its plain value (a SymStr's own gives a plain str)."""
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_sf_")}
        return copyreg.__newobj__, (type(self), self._plain()), state or None


class SymStrSubclass(_Subclass, SymStr):
    """What ``class X(str)`` of an instrumented module derives from (see the module docstring)."""

    _sym = SymStr
    _plain_type = str

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], SymStr):
            return cls._adopt(args[0])
        if args and isinstance(args[0], SymBytes) and (len(args) > 1 or kwargs):
            text = args[0].decode(*args[1:], **kwargs)  # str(b, encoding) is b.decode(encoding)
            if isinstance(text, SymStr):
                return cls._adopt(text)
            args, kwargs = (text,), {}
        plain = str(*args, **kwargs)
        return SymStr.__new__(cls, plain, [ord(c) for c in plain], None, False)

    def _constant_items(self) -> list[Any]:
        return [ord(c) for c in str.__str__(self)]


class SymBytesSubclass(_Subclass, SymBytes):
    """What ``class X(bytes)`` of an instrumented module derives from (see the module docstring)."""

    _sym = SymBytes
    _plain_type = bytes

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], SymBytes):
            return cls._adopt(args[0])
        plain = bytes(*args, **kwargs)
        return SymBytes.__new__(cls, plain, list(plain), None, False)

    def _constant_items(self) -> list[Any]:
        return list(bytes(memoryview(self)))


def _int_field(name: str) -> property:
    """A SymInt's ``value``/``expr``/``deps``/``width`` on an instance: what its construction set,
    else a constant of its own value (one made by ``int.__new__(cls, x)`` called by name)."""
    key = "_sf_" + name

    def get(self: Any) -> Any:
        d = self.__dict__
        if key not in d:
            d.update(_sf_value=int.__int__(self), _sf_expr=None, _sf_deps=0, _sf_width=WIDTH)
        return d[key]

    def set_(self: Any, value: Any) -> None:
        self.__dict__[key] = value

    return property(get, set_)


class SymIntSubclass(SymInt):
    """What ``class X(int)`` of an instrumented module derives from (construct's ``EnumInteger``,
    a format's ``p_uint32``): an instance built from a SymInt keeps its term, as ``SymStrSubclass``
    keeps a SymStr's items; one built from a plain value is a constant. Arithmetic gives a SymInt,
    as ``int``'s gives an ``int``."""

    value = _int_field("value")
    expr = _int_field("expr")
    deps = _int_field("deps")
    width = _int_field("width")

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        value = sym_int(*args, **kwargs)  # int(text, base) of symbolic text stays symbolic
        if isinstance(value, SymInt) and value.expr is not None:
            return SymInt.__new__(cls, value.value, value.expr, value.deps, value.width)
        return SymInt.__new__(cls, int(value), None, 0)

    def __reduce__(self) -> Any:
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_sf_")}
        return copyreg.__newobj__, (type(self), self.value), state or None


_SWAPS: dict[type, type] = {str: SymStrSubclass, bytes: SymBytesSubclass, int: SymIntSubclass}


def sym_build_class(func: Any, name: str, *bases: Any, **kwds: Any) -> Any:
    """``__build_class__`` of an instrumented module: ``str``/``bytes`` as a base is swapped for
    its adapter, unless a metaclass of its own or a base that is not a plain class says otherwise
    (or the swapped bases cannot make a class: then as written)."""
    if "metaclass" not in kwds and any(b in _SWAPS for b in bases) and all(type(b) is type for b in bases):
        swapped = tuple(_SWAPS.get(b, b) for b in bases)
        try:
            return builtins.__build_class__(func, name, *swapped, **kwds)
        except TypeError:  # a layout the adapters cannot share (e.g. with another C base)
            pass
    return builtins.__build_class__(func, name, *bases, **kwds)
