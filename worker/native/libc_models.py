"""Models of libc's number parsers (strtol and kin) for the TritonDSE engine, which has none.

TritonDSE models about 80 libc functions; ``strtol``, ``strtoll``, ``strtoull``, ``atol`` and
``atoll`` are not among them, and its ``strtoul`` pins every character of the string and writes
no ``endptr``. A C program that reads a number from its input mostly calls one of them, so the
engine refused such programs ("does not model strtol()"). Each model here parses the string as
glibc does (leading white space, a sign, a base prefix for base 0 or 16, digits of the base,
``endptr`` after the last digit or at ``nptr`` when there is none, the type's limits on overflow)
and returns the value: concretely, except for decimal digits. For those the value is a formula
over the input's bytes, as TritonDSE's own ``atoi`` (up to ``SYMBOLIC_DIGITS`` digits, each one
a digit or the end of the number), so the solver can turn ``port=80`` into ``port=31337``. The
white space, sign and prefix before the digits are pinned to what they are.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

SYMBOLIC_DIGITS = 10  # decimal digits followed symbolically, as TritonDSE's atoi
_SPACE = " \t\n\v\f\r"


def parse_number(text: bytes, base: int, signed: bool, bits: int) -> tuple[int, int, int, int, bool]:
    """glibc's strto* on `text`: (value as the C type's bits, index of the first digit, number
    of digits, the base used, negative). No digits: value 0 and 0 digits (``endptr = nptr``)."""
    s = text.decode("latin-1").lower()
    i = 0
    while i < len(s) and s[i] in _SPACE:
        i += 1
    negative = s[i:i + 1] == "-"
    if s[i:i + 1] in ("+", "-"):
        i += 1
    if base in (0, 16) and s[i:i + 2] == "0x" and s[i + 2:i + 3] and s[i + 2] in string.hexdigits:
        base, i = 16, i + 2
    elif base == 0:
        base = 8 if s[i:i + 1] == "0" else 10
    valid = (string.digits + string.ascii_lowercase)[:base] if 2 <= base <= 36 else ""
    n = 0
    while i + n < len(s) and s[i + n] in valid:
        n += 1
    magnitude = int(s[i:i + n], base) if n else 0
    value = -magnitude if negative else magnitude
    if signed:
        value = min(max(value, -(1 << (bits - 1))), (1 << (bits - 1)) - 1)  # LONG_MIN / LONG_MAX
    elif magnitude >= 1 << bits:
        value = (1 << bits) - 1  # ULONG_MAX (no sign applied on overflow)
    return value & ((1 << bits) - 1), i, n, base, negative


def _model(signed: bool, with_end: bool) -> Callable[[Any, Any], Any]:
    """The model of ``strto{l,ll,ul,ull}`` (`with_end`: ``endptr`` and ``base`` arguments) or
    ``ato{l,ll}`` (base 10, no ``endptr``) on x86-64, where long and long long are 64 bits."""

    def model(se: Any, pstate: Any) -> Any:
        bits = 64
        nptr = pstate.get_argument_value(0)
        endptr = pstate.get_argument_value(1) if with_end else 0
        base = pstate.get_argument_value(2) if with_end else 10
        if with_end:
            pstate.concretize_argument(2)
        text = pstate.memory.read_string(nptr).encode("latin-1", errors="replace")
        value, first, digits, used_base, negative = parse_number(text, base, signed, bits)
        if endptr:
            pstate.memory.write_ptr(endptr, nptr + first + digits if digits else nptr)
        ast = pstate.actx
        for k in range(first):  # white space, sign, base prefix: as they are
            pstate.push_constraint(pstate.read_symbolic_memory_byte(nptr + k).getAst() == text[k])
        if used_base != 10 or not digits or digits > SYMBOLIC_DIGITS:
            for k in range(first, first + digits + 1):  # the digits and what ends them
                if k < len(text):
                    pstate.push_constraint(pstate.read_symbolic_memory_byte(nptr + k).getAst() == text[k])
            return value
        cells = [pstate.read_symbolic_memory_byte(nptr + first + k).getAst() for k in range(SYMBOLIC_DIGITS)]

        def is_digit(cell: Any) -> Any:
            return ast.land([cell >= 0x30, cell <= 0x39])

        def number(count: int) -> Any:
            n = ast.bv(0, bits)
            for cell in cells[:count]:
                n = n * ast.bv(10, bits) + (ast.zx(bits - 8, cell) - ast.bv(0x30, bits))
            return ast.bv(0, bits) - n if negative else n

        result = number(SYMBOLIC_DIGITS)
        for count in range(SYMBOLIC_DIGITS - 1, 0, -1):  # the first cell that is not a digit ends it
            result = ast.ite(ast.lnot(is_digit(cells[count])), number(count), result)
        pstate.push_constraint(is_digit(cells[0]))  # a number, as this run's input has one
        return result

    return model


MODELS: dict[str, Callable[[Any, Any], Any]] = {
    "strtol": _model(signed=True, with_end=True),
    "strtoll": _model(signed=True, with_end=True),
    "strtoul": _model(signed=False, with_end=True),
    "strtoull": _model(signed=False, with_end=True),
    "atol": _model(signed=True, with_end=False),
    "atoll": _model(signed=True, with_end=False),
}
