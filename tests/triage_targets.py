"""Python targets for the crash-identity tests: two bugs in one shared helper, one bug by two paths."""


def _read_length(buf: bytes, pos: int) -> int:
    """The helper both parsers share: one bug (a reserved length) reached from each."""
    n = buf[pos]
    if n == 0xFF:
        raise ValueError("length 0xFF is reserved")
    return n


def parse_header(data: bytes) -> int:
    return _read_length(data, 1)


def parse_body(data: bytes) -> int:
    return _read_length(data, 2)


def _check_kind(kind: int) -> None:
    if kind == 0x77:
        raise LookupError("kind 0x77 is unknown")


def target(data: bytes) -> None:
    if len(data) < 3:
        return
    if data[0] == ord("H"):
        parse_header(data)
    elif data[0] == ord("B"):
        parse_body(data)
    elif data[0] == ord("K"):  # the same bug (_check_kind) by two paths: K and L
        _check_kind(data[1])
    elif data[0] == ord("L") and data[2] == ord("l"):
        _check_kind(data[1])


# --- identity cases: each pair of inputs below is two bugs, or one bug reached twice -------------

import struct  # noqa: E402 - the cases below use these; the module's first half needs none
import zlib  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402 - stdlib code under test behind this harness


def url_target(data: bytes) -> None:
    """``urllib.parse`` (stdlib) under test: two of its ValueErrors are two bugs."""
    parts = urlsplit(data.decode("latin-1"))  # b"http://[::1": "Invalid IPv6 URL" in urlsplit
    _ = parts.port  # b"http://h:99999999": "Port out of range" in the port property


def _wrap(fn, data: bytes) -> None:
    try:
        fn(data)
    except (IndexError, KeyError) as exc:
        raise RuntimeError("malformed record") from exc  # one wrapper over distinct root causes


def _first(data: bytes) -> int:
    return data[10]  # IndexError: root cause 1


def _second(data: bytes) -> int:
    return {}[data[:1]]  # KeyError: root cause 2


def chained_target(data: bytes) -> None:
    if data[:1] == b"1":
        _wrap(_first, data)
    elif data[:1] == b"2":
        _wrap(_second, data)
    elif data[:1] == b"3":  # root cause 1 again, by another path
        _wrap(_first, data[:5])


def _value(data: bytes, pos: int) -> int:
    """A recursive-descent parser without a depth limit: '[' nests."""
    if pos < len(data) and data[pos:pos + 1] == b"[":
        return _array(data, pos + 1)
    return pos


def _array(data: bytes, pos: int) -> int:
    return _value(data, pos)


def _group(data: bytes, pos: int) -> int:
    """A second, distinct unbounded recursion: '(' nests."""
    if pos < len(data) and data[pos:pos + 1] == b"(":
        return _group(data, pos + 1)
    return pos


def recursion_target(data: bytes) -> None:
    if data[:1] == b"(":
        _group(data, 0)
    else:
        _value(data, 0)


def _expr(data: bytes, pos: int) -> int:
    """A recursive descent with two ways to nest, as a template or expression parser has:
    '[' is a list, '(' a tuple, each holding an expression."""
    if pos < len(data) and data[pos:pos + 1] == b"[":
        return _list(data, pos + 1)
    if pos < len(data) and data[pos:pos + 1] == b"(":
        return _tuple(data, pos + 1)
    return pos


def _list(data: bytes, pos: int) -> int:
    return _expr(data, pos)


def _tuple(data: bytes, pos: int) -> int:
    return _expr(data, pos)


def nested_target(data: bytes) -> None:
    _expr(data, 0)


# A library's layers above its recursive descent (each line long, as real code's are), then an
# expression grammar with no depth limit that the input enters at one of three functions (by its
# first byte) and nests through by two paths: '(' a group, '[' a call.
def _layer_one(data: bytes) -> int:
    return _layer_two(data[1:], entry_point_chosen_by_the_first_byte=data[:1])


def _layer_two(data: bytes, entry_point_chosen_by_the_first_byte: bytes) -> int:
    return _layer_three(data, entry_point_chosen_by_the_first_byte, position_in_the_text=0)


def _layer_three(data: bytes, entry_point_chosen_by_the_first_byte: bytes, position_in_the_text: int) -> int:
    return _layer_four(data, entry_point_chosen_by_the_first_byte, position_in_the_text)


def _layer_four(data: bytes, entry_point_chosen_by_the_first_byte: bytes, position_in_the_text: int) -> int:
    entries = {b"=": _e_sum, b"*": _e_term}
    return entries.get(entry_point_chosen_by_the_first_byte, _e_atom)(data, position_in_the_text)


def _e_sum(data: bytes, pos: int) -> int:
    if pos > len(data):  # a call into C in each function: the limit can hit in any of them
        return pos
    return _e_term(data, pos)


def _e_term(data: bytes, pos: int) -> int:
    if pos > len(data):
        return pos
    return _e_atom(data, pos)


def _e_atom(data: bytes, pos: int) -> int:
    if data[pos:pos + 1] == b"(":
        return _e_sum(data, pos + 1)
    if data[pos:pos + 1] == b"[":
        return _e_call(data, pos + 1)
    return pos


def _e_call(data: bytes, pos: int) -> int:  # a shorter turn than a group's: the limit hits anywhere
    if pos > len(data):
        return pos
    return _e_atom(data, pos)


def layered_target(data: bytes) -> None:
    _layer_one(data)


def assert_target(data: bytes) -> None:
    """A differential-style harness: two checks in one function are two bugs."""
    if len(data) < 2:
        return
    assert data[0] != 0x41, "first check"
    assert data[1] != 0x42, "second check"


def exit_target(data: bytes) -> None:
    if data[:1] == b"x":
        raise SystemExit(3)
    if data[:1] == b"k":
        raise KeyboardInterrupt


def hard_exit_target(data: bytes) -> None:
    """Ends its process with the status of the input's first byte (os._exit skips every handler);
    b"f" forks a child that exits as asked while the target returns."""
    import os

    if data[:1] == b"f":
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 7, status  # the child's exit is its own
        return
    if data:
        os._exit(data[0])


def _chunk(data: bytes) -> bytes:
    (size,) = struct.unpack(">I", data[1:5])  # struct.error on a short header
    return zlib.decompress(data[5:5 + size])  # zlib.error on a bad stream: another bug, same function


class RecordError(Exception):
    """This module's own error: raised here, named without its module."""


def c_errors_target(data: bytes) -> None:
    if data[:1] == b"C":
        _chunk(data)
    elif data[:1] == b"E":
        raise RecordError("bad record")


def _spin_helper(x: int) -> int:
    return x + 1


def _spin(data: bytes) -> None:
    i = 0
    while data:  # an infinite loop that keeps calling a helper
        i = _spin_helper(i)


def _stall() -> None:
    while True:  # a second, distinct infinite loop
        pass


def hang_target(data: bytes) -> None:
    if data[:1] in (b"s", b"S"):  # one loop, two inputs
        _spin(data)
    elif data[:1] == b"t":
        _stall()


def guarded_hang_target(data: bytes) -> None:
    try:
        _stall()  # GUARDED_HANG_LINE: where it hangs
    except ValueError:  # the line a report read after the unwinding named
        pass


def _descend(data: bytes, depth: int) -> None:
    if depth:
        _descend_again(data, depth - 1)  # a parser's nesting through two rules, hundreds of frames deep ...
    else:
        _stall()  # ... then a loop at the bottom


def _descend_again(data: bytes, depth: int) -> None:
    _descend(data, depth)


def deep_hang_target(data: bytes) -> None:
    if data[:1] == b"d":
        _descend(data, 200 + data[1:2].count(b"x"))


def _deref(address: int) -> bytes:
    import ctypes

    return ctypes.string_at(address)  # SIGSEGV in C code: the Python process dies


def segv_target(data: bytes) -> None:
    if data[:1] == b"a":  # one bug (_deref's), two inputs
        _deref(0)
    elif data[:1] == b"b":
        _deref(8)
    elif data[:1] == b"c":  # another call site: another bug
        import ctypes

        ctypes.string_at(16)



def library_target(data: bytes) -> None:
    """A harness that imports json for itself, over a library (tests/triage_lib.py) that calls it."""
    import json

    from tests import triage_lib

    if data[:1] == b"c":
        triage_lib.load_config(data[1:].decode("latin-1"))
    elif data[:1] == b"s":
        triage_lib.load_state(data[1:].decode("latin-1"))
    else:
        json.dumps(list(data))
