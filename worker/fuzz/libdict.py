"""Dictionary tokens from the library under test: the short string and bytes constants of its code and tables.

A parser compares its input with constants: keywords, magic numbers, operators, tag names.
Atheris's instrumentation reports `==` between a string and a constant to libFuzzer when that
comparison runs, but not a membership test (`word in KEYWORDS`, a dict lookup, `in ("a", "b")`),
`str.startswith`, or a constant the input never got near. libFuzzer can insert dictionary tokens
from the start (`-dict=FILE`). The fuzz process (live_child.py) gives it the constants of the
modules under test, read from the loaded code, as AFL++'s autodictionary does for C:

- **tables** first: the strings of module- and class-level sets, frozensets, tuples, lists and
  dict keys (a parser's keyword and operator tables), and tuple/frozenset constants in code
  (what `x in ("a", "b")` compiles to);
- with them, the literal runs of the modules' compiled regular expressions (module- and
  class-level, also inside such a table: a lexer's rules): `r"\b(select|where)\b"` gives
  `select` and `where`, `r"<!--.*?-->"` gives `<!--` and `-->`;
- then every other short string or bytes constant of the modules' functions and methods (their
  nested functions included), the ones more functions use first.

A token is 2..64 bytes (libFuzzer's longest dictionary word), strings as UTF-8, at most one line
and at most three words (prose - messages, docstrings - is left out), not a dunder name. At most
`limit` tokens: libFuzzer picks dictionary words uniformly, so a long tail of rare constants
would dilute the useful ones.
"""

from __future__ import annotations

import re
import sys
import types
from collections import Counter
from collections.abc import Callable, Iterable
from re import _constants as _OPS  # the pure-Python parser of `re` and its opcodes (Python >= 3.11)
from re import _parser as _PARSER

MAX_WORD = 64  # libFuzzer's Word::GetMaxSize()
DEFAULT_LIMIT = 1000
_TABLES = (dict, set, frozenset, tuple, list)  # a dict's words are its keys
_REPEATS = (_OPS.MAX_REPEAT, _OPS.MIN_REPEAT, _OPS.POSSESSIVE_REPEAT)


def _token(value: object) -> bytes | None:
    if type(value) is str:
        if ("\n" in value or value.count(" ") > 2 or value.isspace()
                or (value.startswith("__") and value.endswith("__"))):
            return None
        data = value.encode("utf-8", "surrogatepass")
    elif type(value) is bytes:
        data = value
    else:
        return None
    return data if 2 <= len(data) <= MAX_WORD else None


class _Collector:
    def __init__(self) -> None:
        self.tables: Counter[bytes] = Counter()
        self.constants: Counter[bytes] = Counter()
        self._codes: set[int] = set()

    def table(self, values: Iterable[object], depth: int = 0) -> None:
        for v in values:
            if (t := _token(v)) is not None:
                self.tables[t] += 1
            elif type(v) is re.Pattern:
                self.pattern(v)
            elif depth == 0 and type(v) is tuple:  # a rule: (pattern, action), (keyword, kind)
                self.table(v, 1)

    def pattern(self, pattern: re.Pattern) -> None:
        """The literal runs of a compiled regular expression (its alternatives, groups and
        repeated parts too), as table words."""
        try:
            parsed = _PARSER.parse(pattern.pattern, pattern.flags & ~re.DEBUG)
        except Exception:  # noqa: BLE001 - a pattern the parser of this Python does not take
            return
        wide = isinstance(pattern.pattern, bytes)
        for run in _literal_runs(parsed):
            t = _token(bytes(run) if wide else "".join(map(chr, run)))
            if t is not None:
                self.tables[t] += 1

    def value(self, value: object) -> None:
        """A module- or class-level value: a table, a function, a method, a constant."""
        if isinstance(value, _TABLES):
            self.table(list(value)[:10_000])
        elif type(value) is re.Pattern:
            self.pattern(value)
        elif isinstance(value, (staticmethod, classmethod)):
            self.value(value.__func__)
        elif isinstance(value, property):
            for f in (value.fget, value.fset, value.fdel):
                self.value(f)
        elif isinstance(value, types.FunctionType):
            self.code(value.__code__)
        elif (t := _token(value)) is not None:
            self.constants[t] += 1

    def code(self, code: types.CodeType) -> None:
        if id(code) in self._codes:
            return
        self._codes.add(id(code))
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                self.code(c)
            elif isinstance(c, (tuple, frozenset)):
                self.table(c)
            elif (t := _token(c)) is not None:
                self.constants[t] += 1

    def module(self, module: types.ModuleType) -> None:
        name = module.__name__
        for key, value in list(vars(module).items()):
            if key.startswith("__"):  # __builtins__, __all__, __doc__: not the module's constants
                continue
            try:
                if isinstance(value, type):
                    if value.__module__ == name:
                        self.cls(value, depth=0)
                elif not isinstance(value, types.ModuleType):
                    self.value(value)
            except Exception:  # noqa: BLE001 - a value that cannot be looked at (a lazy proxy) gives nothing
                continue

    def cls(self, cls: type, depth: int) -> None:
        for key, value in list(vars(cls).items()):
            if key.startswith("__") and key.endswith("__") and not isinstance(value, types.FunctionType):
                continue
            if isinstance(value, type):
                if depth < 2 and value.__module__ == cls.__module__:
                    self.cls(value, depth + 1)
            else:
                self.value(value)


def _literal_runs(parsed: object, depth: int = 0) -> list[list[int]]:
    """Runs of consecutive literal characters of a parsed pattern (`re._parser`'s items)."""
    runs: list[list[int]] = []
    run: list[int] = []
    if depth > 20:
        return runs
    for op, arg in parsed:  # type: ignore[attr-defined]
        if op is _OPS.LITERAL:
            run.append(arg)
            continue
        if run:
            runs.append(run)
            run = []
        if op is _OPS.BRANCH:
            for branch in arg[1]:
                runs += _literal_runs(branch, depth + 1)
        elif op is _OPS.SUBPATTERN:
            runs += _literal_runs(arg[-1], depth + 1)
        elif op in _REPEATS:
            runs += _literal_runs(arg[2], depth + 1)
        elif op in (_OPS.ASSERT, _OPS.ASSERT_NOT):
            runs += _literal_runs(arg[1], depth + 1)
    if run:
        runs.append(run)
    return runs


def library_tokens(modules: Iterable[types.ModuleType], limit: int = DEFAULT_LIMIT) -> list[bytes]:
    """The dictionary tokens of `modules` (see the module docstring), tables first, at most `limit`."""
    found = _Collector()
    for module in modules:
        try:
            found.module(module)
        except Exception:  # noqa: BLE001 - a module whose namespace cannot be read gives nothing
            continue
    out: dict[bytes, None] = {}
    for group in (found.tables, found.constants):
        for token, _ in sorted(group.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0])):
            if len(out) >= limit:
                return list(out)
            out.setdefault(token)
    return list(out)


def dict_line(i: int, token: bytes, prefix: str = "kw") -> str:
    """One libFuzzer/AFL dictionary line for `token` (printable ASCII as is, the rest escaped)."""
    body = "".join(chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else f"\\x{b:02x}" for b in token)
    return f'{prefix}{i}="{body}"\n'


def modules_of(harness: str, wanted: Callable[[str], bool]) -> list[types.ModuleType]:
    """The loaded modules the dictionary is read from: the harness's module and every module
    `wanted` accepts (the harness's packages), symfence's and Atheris's never."""
    from symfence.worker.fuzz.inplace import outside

    ours = outside()
    return [m for name, m in list(sys.modules.items())
            if isinstance(m, types.ModuleType) and ours(name) and (name == harness or wanted(name))]


def write_dictionary(path: str, tokens: list[bytes], first: str | None = None) -> int:
    """Write a libFuzzer dictionary file: the lines of the dictionary file `first` (if any), then
    `tokens`. Returns how many tokens were written."""
    head = ""
    if first:
        with open(first, encoding="latin-1") as fh:
            head = fh.read()
        if head and not head.endswith("\n"):
            head += "\n"
    with open(path, "w", encoding="latin-1") as fh:
        fh.write(head)
        fh.writelines(dict_line(n, token, "lib") for n, token in enumerate(tokens))
    return len(tokens)
