"""An Enum made from a symbolic value (``Kind(data[0])``) is looked up as a table: its membership and the member a branch.

``enum`` is plain code: ``EnumType.__call__`` finds a member through ``_value2member_map_``, a
dict, so a symbolic value was hashed in C (``concretised_hash``) and the member it picked was
fixed (construct's ``EnumInteger``, a ``Kind(IntEnum)`` read from a header). While the engine's
process runs, the call with one symbolic value looks the value up as ``tables`` looks up a
symbolic key in a plain dict (the membership a branch, then which key); any other call, a value
no member has (``_missing_``, a ``Flag``'s combinations) and concrete runs are ``enum``'s own.
"""

from __future__ import annotations

import enum
import sys
from typing import Any

from symfence.worker.concolic.models import is_proxy
from symfence.worker.concolic.tables import _dict_lookup, _plain_key

_plain_call = enum.EnumType.__call__


def _call(cls: Any, value: Any, *args: Any, **kwds: Any) -> Any:
    if not args and not kwds and is_proxy(value):
        table = cls.__dict__.get("_value2member_map_")
        if type(table) is dict and table:
            try:
                return _dict_lookup(table, value, sys._getframe(1))
            except KeyError:  # no member's value (a branch already): enum's own call on the plain
                return _plain_call(cls, _plain_key(value))  # value (ValueError, or the class's _missing_)
    return _plain_call(cls, value, *args, **kwds)


def install() -> None:
    """Model enum lookups in this process (the engine's child: it only changes calls with a proxy)."""
    enum.EnumType.__call__ = _call  # type: ignore[method-assign]
