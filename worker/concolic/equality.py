"""Equality of containers holding proxies (dicts with symbolic keys, lists, tuples) as one symbolic condition.

Instrumented code calls ``sym_eq`` / ``sym_ne`` for ``a == b`` / ``a != b`` when neither side is
a constant. Two dicts, lists or tuples of the same type holding a proxy (up to ``_LIMIT`` items
in all; a dict with symbolic keys up to ``_PAIRING_LIMIT`` entries) are compared as the C code would, item
by item, without calling it: C's ``dict.__eq__`` looks each key up by its hash, so a symbolic key
that is not yet the expected one (``{"": 0} == {"k": 7}``) is a plain miss and nothing is
recorded. Here a dict with symbolic keys equals another of the same size when each of its keys
equals one of the other's keys with an equal value (the keys of each are distinct), an
``Or``/``And`` over the pairs; lists and tuples are the ``And`` of their items, nested
containers likewise. The result is a plain bool when decided concretely, else one ``SymBool``
(a branch where it is tested), whose negation asks for every key and value at once; how many
parts already match is a coverage location of its own (``Recorder.progress``), so an input one
key closer is kept. Anything else is Python's own ``==``.
"""

from __future__ import annotations

import sys
from typing import Any

from symfence.worker.concolic.models import PROXY_TYPES
from symfence.worker.concolic.seqcore import _Seq
from symfence.worker.concolic.symbolic import SymBool, active, all_true, any_true, value_of

_CONTAINERS = (dict, list, tuple)


_LIMIT = 4096  # containers with more items (all levels) are compared by C, unfollowed
_PAIRING_LIMIT = 64  # dicts with symbolic keys larger than this are compared by C


def _followed(a: Any, b: Any) -> bool:
    """Two containers of one type, small enough, at least one holding a proxy somewhere."""
    if type(a) not in _CONTAINERS or type(b) is not type(a):
        return False
    budget = [_LIMIT]
    holds = _holds_proxy(a, budget) or _holds_proxy(b, budget)
    return holds and budget[0] >= 0


def _holds_proxy(x: Any, budget: list[int]) -> bool:
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if isinstance(x, PROXY_TYPES):
        return True
    kind = type(x)
    if kind is dict:
        if len(x) > _PAIRING_LIMIT and any(isinstance(k, PROXY_TYPES) for k in x):
            budget[0] = -1
            return False
        return any(_holds_proxy(k, budget) or _holds_proxy(v, budget) for k, v in x.items())
    if kind in (list, tuple):
        return any(_holds_proxy(item, budget) for item in x)
    return False


def sym_eq(a: Any, b: Any) -> Any:
    """``a == b``: symbolic for two containers of one type holding proxies, else Python's."""
    if _followed(a, b):
        _progress(a, b, sys._getframe(1))
        return _equal(a, b)
    return a == b


def sym_ne(a: Any, b: Any) -> Any:
    """``a != b``, the negation of ``sym_eq`` for containers, else Python's."""
    if _followed(a, b):
        _progress(a, b, sys._getframe(1))
        result = _equal(a, b)
        return result.negated() if isinstance(result, SymBool) else not result
    return a != b


def _progress(a: Any, b: Any, frame: Any) -> None:
    """Report how many parts of the two containers already match (``Recorder.progress``)."""
    rec = active()
    if rec is not None:
        rec.progress(frame, _score(a, b))


def _plain(x: Any) -> Any:
    return x._plain() if isinstance(x, _Seq) else value_of(x)


_SCORE_DEPTH = 32  # containers nested deeper add nothing to the score


def _score(a: Any, b: Any, depth: int = 0) -> int:
    """How much of ``a`` already matches ``b``, concretely (nothing recorded): per container or
    leaf 1 for the same type, 1 more for the same size or value; each dict entry scores as its
    best pairing with an entry of ``b`` (key and value), so a closer shape scores higher. The
    same object scores as a matching leaf at once, as C's comparison takes it as equal without a
    look: a cyclic structure (commonmark's doubly linked delimiter stack, ``node.get("next") !=
    top``) recursed here until a RecursionError, a false finding on every input with emphasis."""
    if a is b:
        return 2
    if depth >= _SCORE_DEPTH:
        return 0
    kind = type(a)
    if kind in (list, tuple) and type(b) is kind:
        return 1 + (len(a) == len(b)) + sum(_score(x, y, depth + 1) for x, y in zip(a, b))
    if kind is dict and type(b) is dict:
        total = 1 + (len(a) == len(b))
        for key, value in a.items():
            total += max((_score(key, k, depth + 1) + _score(value, v, depth + 1) for k, v in b.items()),
                         default=0)
        return total
    if kind in _CONTAINERS or type(b) in _CONTAINERS:
        return 0
    x, y = _plain(a), _plain(b)
    return (type(x) is type(y)) + _same(x, y)


def _same(x: Any, y: Any) -> bool:
    return type(x) is type(y) and x == y if isinstance(x, (str, bytes)) else bool(x == y)


def _truth(test: Any) -> bool:
    return bool(test.value) if isinstance(test, SymBool) else bool(test)


def _equal(a: Any, b: Any) -> Any:
    """True, False or a SymBool: whether ``a == b`` (items compared as C compares them)."""
    if a is b:
        return True  # C's identity shortcut for items
    kind = type(a)
    if kind not in _CONTAINERS or type(b) is not kind:
        result = a == b
        if isinstance(result, SymBool):
            return result
        if not result and type(a) is type(b) and kind in (str, bytes):
            _note_constants(a, b)
        return bool(result)
    if len(a) != len(b):
        return False
    if kind is dict:
        return _dict_equal(a, b)
    tests = []
    for x, y in zip(a, b):
        test = _equal(x, y)
        if test is False:
            return False
        tests.append(test)
    return _all(tests)


def _note_constants(a: Any, b: Any) -> None:
    """Two plain texts found unequal inside a comparison of input-built containers (an empty
    key, whose place in the input is lost, against ``"cmd"``): both are constants an insertion
    may try (``Recorder.constant``; ASCII text, any bytes)."""
    rec = active()
    if rec is None or not rec.symbolic:
        return
    for text in (a, b):
        if isinstance(text, bytes):
            rec.constant(text)
        elif text.isascii():
            rec.constant(text.encode("ascii"))


def _all(tests: list[Any]) -> Any:
    return all_true(tests, all(_truth(t) for t in tests))


def _any(tests: list[Any]) -> Any:
    return any_true(tests, any(_truth(t) for t in tests))


def _dict_equal(a: dict, b: dict) -> Any:
    if not any(isinstance(k, PROXY_TYPES) for k in a) and not any(isinstance(k, PROXY_TYPES) for k in b):
        tests = []
        for key, value in a.items():
            if key not in b:
                for other in b:  # an empty key (its place lost) or a plain one: the keys it is not
                    if other not in a and type(other) is type(key) and type(key) in (str, bytes):
                        _note_constants(key, other)
                return False
            test = _equal(value, b[key])
            if test is False:
                return False
            tests.append(test)
        return _all(tests)
    per_key = []
    for key, value in a.items():
        options = []
        for other_key, other_value in b.items():
            same_key = _equal(key, other_key)
            if same_key is False:
                continue
            same_value = _equal(value, other_value)
            if same_value is False:
                continue
            options.append(_all([same_key, same_value]))
        if not options:
            return False
        per_key.append(_any(options))
    return _all(per_key)
