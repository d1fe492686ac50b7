"""Models of libc functions TritonDSE lacks, for the engine: number parsers, string searches, I/O.

TritonDSE models about 80 libc functions, and the engine refuses a program that calls any other
(its emulation would stop there silently). Common ones were missing, so most real C programs were
refused: the number parsers (``strtol`` and kin, ``atol``: TritonDSE's own ``strtoul`` pins every
character and writes no ``endptr``), the string searches (``strstr``, ``strrchr``, ``memchr``,
``strspn``, ``strcspn``, ``strpbrk``, ``strnlen``, ``strcat``, ``strncat``), ``toupper``/
``tolower`` (and glibc's tables their inline forms read), the byte-order swaps, ``fgetc``/``getc``,
``sscanf``, ``sprintf``/``snprintf`` (TritonDSE's ``sprintf`` writes nothing into the buffer) and
calls with no effect on the run (``fflush``, ``putchar``, ``perror``, ``close``, ``_exit``).

How each keeps the search sound:

- the number parsers parse as glibc does (leading white space, a sign, a base prefix for base 0
  or 16, digits of the base, ``endptr`` after the last digit or at ``nptr`` when there is none,
  the type's limits on overflow). Decimal digits stay symbolic: the value is a formula over the
  input's bytes, as TritonDSE's own ``atoi`` (up to ``SYMBOLIC_DIGITS`` digits, each one a digit
  or the end of the number), so the solver can turn ``port=80`` into ``port=31337``; the white
  space, sign and prefix before them are pinned to what they are;
- ``toupper``, ``tolower`` and the byte swaps are formulas of their argument;
- the searches compute their answer on the concrete bytes and pin the bytes that decided it
  (those read up to the stop), so a later branch on the answer is never negated into an input
  the search would answer differently; ``strcat``/``strncat`` copy the source's symbolic bytes
  as TritonDSE's ``strcpy`` does;
- ``sscanf`` pins the white space and literals it matched; a decimal it scans is a formula of
  fixed length (the format parses on from its end), strings it copies keep their symbolic bytes;
- ``sprintf`` and kin write their text concretely; a conversion they do not follow (``%f``,
  ``%n``) ends the run as a task error naming it, never a wrong text.
"""

from __future__ import annotations

import re
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
        for k in range(first):  # white space, sign, base prefix: as they are
            pstate.push_constraint(pstate.read_symbolic_memory_byte(nptr + k).getAst() == text[k])
        if used_base != 10 or not digits or digits > SYMBOLIC_DIGITS:
            _pin(pstate, nptr + first, min(digits + 1, len(text) - first))  # the digits and what ends them
            return value
        return decimal(pstate, nptr + first, negative, bits, fixed=digits if endptr else 0)

    return model


def decimal(pstate: Any, addr: int, negative: bool, bits: int, fixed: int = 0) -> Any:
    """The value of the decimal digits at `addr` as a formula over those bytes: up to
    SYMBOLIC_DIGITS of them, the first cell that is not a digit ends the number (the first is
    one, as in this run). `fixed`: exactly that many digits, then a byte that is not one (the
    caller parses on from the end it found: `endptr`, the rest of an sscanf format)."""
    ast = pstate.actx
    cells = [pstate.read_symbolic_memory_byte(addr + k).getAst() for k in range(max(fixed + 1, SYMBOLIC_DIGITS))]
    if fixed:
        for cell in cells[:fixed]:
            pstate.push_constraint(ast.land([cell >= 0x30, cell <= 0x39]))
        pstate.push_constraint(ast.lnot(ast.land([cells[fixed] >= 0x30, cells[fixed] <= 0x39])))
        n = ast.bv(0, bits)
        for cell in cells[:fixed]:
            n = n * ast.bv(10, bits) + (ast.zx(bits - 8, cell) - ast.bv(0x30, bits))
        return ast.bv(0, bits) - n if negative else n

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
    pstate.push_constraint(is_digit(cells[0]))
    return result


# -- string searches: concrete answers, the bytes that decided them pinned ---------------------

def _pin(pstate: Any, addr: int, count: int) -> None:
    """The `count` bytes at `addr` keep their concrete values (what the answer was decided on)."""
    for k in range(count):
        cell = pstate.read_symbolic_memory_byte(addr + k).getAst()
        pstate.push_constraint(cell == pstate.memory.read(addr + k, 1)[0])


def _length(pstate: Any, addr: int, length: int, terminated: bool = True) -> None:
    """The string at `addr` keeps its length (its bytes non-zero, then the terminator), not its
    content: as TritonDSE's strcpy model."""
    for k in range(length):
        pstate.push_constraint(pstate.read_symbolic_memory_byte(addr + k).getAst() != 0)
    if terminated:
        pstate.push_constraint(pstate.read_symbolic_memory_byte(addr + length).getAst() == 0)


def _string(pstate: Any, addr: int) -> bytes:
    return pstate.memory.read_string(addr).encode("latin-1")


def _memchr(se: Any, pstate: Any) -> int:
    s, n = pstate.get_argument_value(0), pstate.get_argument_value(2)
    pstate.concretize_argument(1)
    pstate.concretize_argument(2)
    c = pstate.get_argument_value(1) & 0xFF
    data = pstate.memory.read(s, n) if n else b""
    at = data.find(bytes([c]))
    _pin(pstate, s, n if at < 0 else at + 1)
    return 0 if at < 0 else s + at


def _strrchr(se: Any, pstate: Any) -> int:
    s = pstate.get_argument_value(0)
    pstate.concretize_argument(1)
    c = pstate.get_argument_value(1) & 0xFF
    text = _string(pstate, s) + b"\0"  # the terminator is part of the string for strrchr(s, 0)
    _pin(pstate, s, len(text))
    at = text.rfind(bytes([c]))
    return 0 if at < 0 else s + at


def _strstr(se: Any, pstate: Any) -> int:
    h, n = pstate.get_argument_value(0), pstate.get_argument_value(1)
    hay, needle = _string(pstate, h), _string(pstate, n)
    _pin(pstate, n, len(needle) + 1)
    at = hay.find(needle)
    _pin(pstate, h, len(hay) + 1 if at < 0 else at + len(needle))
    return 0 if at < 0 else h + at


def _span(accepting: bool) -> Callable[[Any, Any], int]:
    def span(se: Any, pstate: Any) -> int:
        s, a = pstate.get_argument_value(0), pstate.get_argument_value(1)
        text, accept = _string(pstate, s), _string(pstate, a)
        chars = set(accept)
        _pin(pstate, a, len(accept) + 1)
        k = 0
        while k < len(text) and (text[k] in chars) == accepting:
            k += 1
        _pin(pstate, s, k + 1)  # the bytes spanned and the one that stopped it
        return k

    return span


def _strpbrk(se: Any, pstate: Any) -> int:
    s = pstate.get_argument_value(0)
    k = _span(False)(se, pstate)
    return 0 if k >= len(_string(pstate, s)) else s + k


def _strnlen(se: Any, pstate: Any) -> int:
    s = pstate.get_argument_value(0)
    pstate.concretize_argument(1)
    limit = pstate.get_argument_value(1)
    length = min(len(_string(pstate, s)), limit)
    _length(pstate, s, length, terminated=length < limit)
    return length


def _cat(bounded: bool) -> Callable[[Any, Any], int]:
    def cat(se: Any, pstate: Any) -> int:
        dst, src = pstate.get_argument_value(0), pstate.get_argument_value(1)
        if bounded:
            pstate.concretize_argument(2)
        end = dst + len(_string(pstate, dst))
        _length(pstate, dst, end - dst)
        whole = len(_string(pstate, src))
        size = min(whole, pstate.get_argument_value(2)) if bounded else whole
        _length(pstate, src, size, terminated=size == whole)
        for k in range(size):
            pstate.write_symbolic_memory_byte(end + k, pstate.read_symbolic_memory_byte(src + k))
        pstate.memory.write(end + size, b"\0")
        return dst

    return cat


# -- formulas of the argument ----------------------------------------------------------------

def _case(upper: bool) -> Callable[[Any, Any], Any]:
    def case(se: Any, pstate: Any) -> Any:
        ast = pstate.actx
        c = ast.extract(31, 0, pstate.get_argument_symbolic(0).getAst())
        low, high = (0x61, 0x7A) if upper else (0x41, 0x5A)
        inside = ast.land([c >= ast.bv(low, 32), c <= ast.bv(high, 32)])
        shifted = c - ast.bv(0x20, 32) if upper else c + ast.bv(0x20, 32)
        return ast.zx(32, ast.ite(inside, shifted, c))

    return case


def _swap(width: int) -> Callable[[Any, Any], Any]:
    def swap(se: Any, pstate: Any) -> Any:
        ast = pstate.actx
        x = pstate.get_argument_symbolic(0).getAst()
        parts = [ast.extract(8 * k + 7, 8 * k, x) for k in range(width // 8)]  # low byte first
        return ast.zx(64 - width, ast.concat(parts))

    return swap


# -- input and calls with no effect on the run -------------------------------------------------

def _fgetc(se: Any, pstate: Any) -> Any:
    fd = pstate.get_argument_value(0)
    if not pstate.file_descriptor_exists(fd):
        return pstate.minus_one
    filedesc = pstate.get_file_descriptor(fd)
    offset = filedesc.offset
    data = filedesc.read(1)
    if not data:
        return pstate.minus_one
    if filedesc.is_input_fd():  # as TritonDSE's getchar
        se.inject_symbolic_file_register(pstate.return_register, filedesc.name, data[0], offset)
        value = pstate.read_symbolic_register(pstate.return_register).getAst()
        pstate.push_constraint(pstate.actx.land([0 <= value, value <= 255]))
        return value
    return data[0]


def _c_locale_class(c: int) -> int:
    """glibc's classification bits of byte `c` in the C locale (``<ctype.h>``'s _ISbit on a
    little-endian machine: bits 0-7 in the high byte, 8-11 in the low one)."""
    if not 0 <= c < 128:
        return 0
    ch = chr(c)
    bits = [ch.isupper(), ch.islower(), ch.isalpha(), ch.isdigit(), ch in string.hexdigits,
            ch in " \t\n\v\f\r", 0x20 <= c < 0x7F, 0x21 <= c < 0x7F, ch in " \t", c < 0x20 or c == 0x7F,
            0x21 <= c < 0x7F and not ch.isalnum(), ch.isalnum()]
    return sum(((1 << b) << 8 if b < 8 else (1 << b) >> 8) for b, on in enumerate(bits) if on)


def _table_loc(name: str, table: bytes, entry: int) -> Callable[[Any, Any], int]:
    """A ``__ctype_*_loc`` model: the address of a pointer to `table` (entries of `entry` bytes,
    indexed -128..255) at its index 0, placed on the heap once per execution (the program calls
    it at every use)."""

    def loc(se: Any, pstate: Any) -> int:
        placed = se.__dict__.setdefault("_symfence_ctype", {})
        if name not in placed:
            base = pstate.heap_allocator.alloc(pstate.ptr_size + len(table))
            pstate.memory.write(base + pstate.ptr_size, table)
            pstate.memory.write_ptr(base, base + pstate.ptr_size + 128 * entry)
            placed[name] = base
        return placed[name]

    return loc


def _case_table(upper: bool) -> bytes:
    """glibc's C-locale toupper/tolower table: int32 entries (TritonDSE's toupper one is bytes)."""
    low, high, shift = (0x61, 0x7A, -32) if upper else (0x41, 0x5A, 32)
    return b"".join(((i + shift if low <= i <= high else i) & 0xFFFFFFFF).to_bytes(4, "little")
                    for i in range(-128, 256))


# The tables `isspace`, `isdigit`, ... (uint16 class bits) and `toupper`/`tolower` read inline.
# TritonDSE's class table was too short: `isspace(0xff)` read past it, a crash in the emulation
# the program never had; it had no tolower table.
_CLASS_TABLE = b"".join(_c_locale_class(i & 0xFF if i >= 0 else -1).to_bytes(2, "little") for i in range(-128, 256))


# -- sprintf and kin: the text written, concretely --------------------------------------------

_CONVERSION = re.compile(rb"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d*))?(hh|h|ll|l|z|j|t|L|q)?([diouxXcspn%a-zA-Z])")
_INT_BITS = {b"hh": 8, b"h": 16, b"l": 64, b"ll": 64, b"q": 64, b"z": 64, b"j": 64, b"t": 64}


class NotModelled(Exception):
    """A call the model cannot follow (a conversion it does not know): the engine's task error."""


def format_c(fmt: bytes, arg: Callable[[], int], read: Callable[[int], bytes]) -> bytes:
    """glibc's printf on `fmt`, its integer and pointer arguments taken in order from `arg()`,
    strings read by `read(address)`. Floating-point and %n: NotModelled."""
    out, at = [], 0
    for m in _CONVERSION.finditer(fmt):
        out.append(fmt[at:m.start()])
        at = m.end()
        flags, width, precision, length, conv = m.groups()
        if conv == b"%":
            out.append(b"%")
            continue
        if conv not in b"diouxXcsp":
            raise NotModelled(f"the %{conv.decode(errors='replace')} conversion")
        if width == b"*":
            width = str(_signed(arg(), 32)).encode()
        if precision == b"*":
            p = _signed(arg(), 32)
            precision = str(p).encode() if p >= 0 else None
        value = arg()
        spec = b"%" + flags + (width or b"") + (b"." + precision if precision is not None else b"")
        if conv in b"di":
            text = (spec + b"d") % _signed(value, _INT_BITS.get(length or b"", 32))
        elif conv in b"ouxX":
            value &= (1 << _INT_BITS.get(length or b"", 32)) - 1
            if conv == b"o" and b"#" in flags:  # C: the precision grows to a leading 0 (Python: 0o)
                need = len(b"%o" % value) + 1 if value else 1
                given = int(precision) if precision else 1
                spec = b"%" + flags.replace(b"#", b"") + (width or b"") + b".%d" % max(given, need)
            text = (spec + (b"d" if conv == b"u" else conv)) % value
        elif conv == b"c":
            text = (spec + b"c") % (value & 0xFF)
        elif conv == b"s":
            text = (spec + b"s") % (read(value) if value else b"(null)")
        else:  # %p
            text = (spec.replace(b"#", b"") + b"s") % (b"(nil)" if not value else b"0x%x" % value)
        out.append(text)
    out.append(fmt[at:])
    return b"".join(out)


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _write_concrete(pstate: Any, addr: int, data: bytes) -> None:
    """Write `data` as plain bytes: whatever symbolic value those cells held is dropped."""
    for k in range(len(data)):
        pstate.tt_ctx.concretizeMemory(addr + k)
    pstate.memory.write(addr, data)


def _printf(buffer_arg: int, size_arg: int | None, fmt_arg: int) -> Callable[[Any, Any], int]:
    """``sprintf``-like: the buffer, the size (None: unbounded), the format, by argument index."""

    def model(se: Any, pstate: Any) -> int:
        buf, fmt = pstate.get_argument_value(buffer_arg), pstate.get_argument_value(fmt_arg)
        following = iter(range(fmt_arg + 1, fmt_arg + 64))
        try:
            text = format_c(_string(pstate, fmt), lambda: pstate.get_argument_value(next(following)),
                            lambda addr: _string(pstate, addr))
        except NotModelled as exc:
            se.__dict__.setdefault("_symfence_not_modelled", []).append(str(exc))
            raise _abort(str(exc)) from None
        size = None if size_arg is None else pstate.get_argument_value(size_arg)
        if size is None:
            _write_concrete(pstate, buf, text + b"\0")
        elif size:
            _write_concrete(pstate, buf, text[:size - 1] + b"\0")
        return len(text)

    return model


def _abort(why: str) -> Exception:
    from tritondse.exception import AbortExecutionException

    return AbortExecutionException(why)


# -- sscanf: glibc's matching, numbers as formulas where strtol's would be ---------------------

_SCAN = re.compile(rb"%(\*)?(\d+)?(hh|h|ll|l|z|j|t|L|q)?([diouxXcsn%]|\[\^?\]?[^\]]*\])")
_SPACES = frozenset(b" \t\n\v\f\r")
_BASES = {b"d": 10, b"u": 10, b"i": 0, b"o": 8, b"x": 16, b"X": 16}


def _scanset(spec: bytes) -> tuple[frozenset[int], bool]:
    """A %[...] conversion's set of bytes and whether it is negated (%[^...])."""
    body = spec[1:-1]
    negated = body[:1] == b"^"
    body = body[1:] if negated else body
    chars: set[int] = set()
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1:k + 2] == b"-":
            chars.update(range(body[k], body[k + 2] + 1))
            k += 3
        else:
            chars.add(body[k])
            k += 1
    return frozenset(chars), negated


def _sscanf(se: Any, pstate: Any) -> Any:
    src, fmt = pstate.get_argument_value(0), pstate.get_argument_value(1)
    text, f = _string(pstate, src), _string(pstate, fmt)
    following = iter(range(2, 64))
    pos = i = assigned = 0
    completed = False  # a conversion completed (before one, an input failure returns EOF)

    def skip_spaces() -> None:
        nonlocal pos
        start = pos
        while pos < len(text) and text[pos] in _SPACES:
            pos += 1
        _pin(pstate, src + start, pos - start)  # the spaces as they are, and what ended them not one
        if pos < len(text):
            cell = pstate.read_symbolic_memory_byte(src + pos).getAst()
            pstate.push_constraint(pstate.actx.land([cell != c for c in sorted(_SPACES)] + [cell != 0]))

    while i < len(f):
        if f[i] in _SPACES:
            skip_spaces()
            i += 1
            continue
        m = _SCAN.match(f, i) if f[i:i + 1] == b"%" else None
        if m is None:  # a literal byte (or a conversion the model does not know: see below)
            if f[i:i + 1] == b"%":
                se.__dict__.setdefault("_symfence_not_modelled", []).append(f"the sscanf format {f[i:i + 4]!r}")
                raise _abort("sscanf conversion")
            if pos >= len(text):
                return assigned if completed else pstate.minus_one
            _pin(pstate, src + pos, 1)  # the byte the literal was matched against
            if text[pos] != f[i]:
                break
            pos, i = pos + 1, i + 1
            continue
        i = m.end()
        suppress, width_s, length, conv = m.groups()
        width = int(width_s) if width_s else 0
        if conv not in (b"c", b"n") and not conv.startswith(b"["):
            skip_spaces()
        if conv == b"%":
            if pos >= len(text) or text[pos] != ord("%"):
                break
            pos += 1
            continue
        if conv == b"n":
            if not suppress:
                pstate.memory.write_int(pstate.get_argument_value(next(following)), pos, 4)
            continue
        if pos >= len(text):
            return assigned if completed else pstate.minus_one
        start = pos
        if conv in _BASES:
            field = text[pos:pos + width] if width else text[pos:]
            signed = conv in (b"d", b"i")
            bits = _INT_BITS.get(length or b"", 32)
            value, first, digits, used_base, negative = parse_number(field, _BASES[conv], signed, 64)
            if not digits:
                _pin(pstate, src + pos, 1)
                break
            pos += first + digits
            _pin(pstate, src + start, first)  # sign and base prefix as they are
            if used_base == 10 and not width and digits <= SYMBOLIC_DIGITS:
                formula = pstate.actx.extract(bits - 1, 0, decimal(pstate, src + start + first, negative, 64,
                                                                   fixed=digits))
            else:
                _pin(pstate, src + start + first, min(digits + 1, len(text) - start - first))
                formula = None
            if not suppress:
                out = pstate.get_argument_value(next(following))
                pstate.memory.write_int(out, value & ((1 << bits) - 1), bits // 8)
                if formula is not None:
                    pstate.write_symbolic_memory_int(out, bits // 8, formula)
                assigned += 1
            completed = True
            continue
        if conv == b"c":
            taken = width or 1
            if len(text) - pos < taken:
                return assigned if completed else pstate.minus_one
        else:
            chars, negated = (_SPACES, True) if conv == b"s" else _scanset(conv)
            taken = 0
            while pos + taken < len(text) and (not width or taken < width) and (text[pos + taken] in chars) != negated:
                taken += 1
            _pin(pstate, src + pos, min(taken + 1, len(text) - pos))  # what matched and what stopped it
            if not taken:
                break
        if not suppress:
            out = pstate.get_argument_value(next(following))
            for k in range(taken):
                pstate.write_symbolic_memory_byte(out + k, pstate.read_symbolic_memory_byte(src + pos + k))
            if conv != b"c":
                pstate.memory.write(out + taken, b"\0")
            assigned += 1
        completed = True
        pos += taken
    return assigned


def _returns(value: int) -> Callable[[Any, Any], int]:
    def model(se: Any, pstate: Any) -> int:
        return value

    return model


def _putchar(se: Any, pstate: Any) -> int:
    return pstate.get_argument_value(0) & 0xFF


def _exit(se: Any, pstate: Any) -> int:
    pstate.stop = True
    return pstate.get_argument_value(0)


MODELS: dict[str, Callable[[Any, Any], Any]] = {
    "memchr": _memchr,
    "strrchr": _strrchr,
    "strstr": _strstr,
    "strspn": _span(True),
    "strcspn": _span(False),
    "strpbrk": _strpbrk,
    "strnlen": _strnlen,
    "strcat": _cat(False),
    "strncat": _cat(True),
    "toupper": _case(True),
    "tolower": _case(False),
    "__ctype_b_loc": _table_loc("b", _CLASS_TABLE, 2),
    "__ctype_toupper_loc": _table_loc("toupper", _case_table(True), 4),
    "__ctype_tolower_loc": _table_loc("tolower", _case_table(False), 4),
    "htons": _swap(16),
    "ntohs": _swap(16),
    "htonl": _swap(32),
    "ntohl": _swap(32),
    "fgetc": _fgetc,
    "getc": _fgetc,
    "sscanf": _sscanf,
    "__isoc99_sscanf": _sscanf,
    "__isoc23_sscanf": _sscanf,
    "sprintf": _printf(0, None, 1),  # TritonDSE's own writes nothing into the buffer
    "snprintf": _printf(0, 1, 2),
    "__sprintf_chk": _printf(0, None, 3),
    "__snprintf_chk": _printf(0, 1, 4),
    "fflush": _returns(0),
    "putchar": _putchar,
    "putc": _putchar,
    "perror": _returns(0),
    "close": _returns(0),
    "_exit": _exit,
    "strtol": _model(signed=True, with_end=True),
    "strtoll": _model(signed=True, with_end=True),
    "strtoul": _model(signed=False, with_end=True),
    "strtoull": _model(signed=False, with_end=True),
    "atol": _model(signed=True, with_end=False),
    "atoll": _model(signed=True, with_end=False),
}
