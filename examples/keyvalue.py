"""Target: an INI-style configuration parser with many paths; a debug listener overruns a table.

A C-style scanner: one ``key=value`` setting per line, blank lines and ``#`` comments are
skipped, ``[server]`` / ``[debug]`` headers switch sections (settings before any header are
``[server]`` ones). ``[server]`` keys: ``name`` (text with the escapes ``\\n \\t \\\\ \\xHH``),
``port`` (decimal), ``mode`` (``ro`` or ``rw``), ``timeout`` (decimal, then ``ms`` or ``s``),
``user`` (an identifier), ``root`` (an absolute path: ``//`` and ``/./`` collapse, ``..`` is
refused) and ``workers``. ``[debug]`` keys: ``level`` (one digit) and, from level 2 on,
``listen=tcp://A.B.C.D:0xPORT[,RETRIES]`` (or ``udp://``). A malformed line rejects the whole
configuration; every configuration read, accepted or not, is escaped into an audit log line.

Planted bug: a privileged debug listener (port below 1024, not bound to 0.0.0.0) builds its
reconnect schedule from the 6-entry ``BACKOFF_MS`` without a bounds check, so a RETRIES of 7..9
overruns it, e.g. ``[debug]\\nlevel=2\\nlisten=tcp://1.0.0.0:0x50,7``. From ``b"\\x00"`` the
concolic search reaches it in about 35 generations, each solving one branch in a row (header,
level, scheme, four octets, port, retries), while the other keys' per-character loops and the
escaping audit log keep it busy with hundreds of other inputs (each task costs more, too).
"""

BACKOFF_MS = (10, 20, 50, 100, 200, 500)
NL, HASH, COMMA, DOT, SLASH, BACKSLASH = 0x0A, 0x23, 0x2C, 0x2E, 0x2F, 0x5C
ZERO = 0x30


class RetryScheduleOverflow(Exception):
    """Planted bug: a debug listener with more retries than back-off entries."""


class _Reject(Exception):
    """The configuration is malformed (not a bug: the parser rejects it)."""


def _expect(data: bytes, pos: int, word: bytes) -> bool:
    """Whether ``data[pos:]`` starts with ``word`` (a bounds check, then a compare)."""
    end = pos + len(word)
    return end <= len(data) and data[pos:end] == word


def _end_of_line(data: bytes, pos: int) -> int:
    """The position after the line's end at ``pos``; rejects trailing garbage."""
    if pos == len(data):
        return pos
    if data[pos] != NL:
        raise _Reject("trailing characters")
    return pos + 1


def _decimal(data: bytes, pos: int, limit: int) -> tuple[int, int]:
    """A decimal number of 1..5 digits at ``pos``, at most ``limit``: (value, end)."""
    start = pos
    value = 0
    while pos < len(data) and ((data[pos] - ZERO) & 0xFF) < 10:  # C's (unsigned)(c - '0') < 10
        if pos - start == 5:
            raise _Reject("number too long")
        value = value * 10 + (data[pos] - ZERO)
        pos += 1
    if pos == start or value > limit:
        raise _Reject("bad number")
    return value, pos


def _hex_digit(c: int) -> int:
    if ((c - ZERO) & 0xFF) < 10:
        return c - ZERO
    if ((c - ord("a")) & 0xFF) < 6:
        return c - ord("a") + 10
    raise _Reject("bad hex digit")


def _hexadecimal(data: bytes, pos: int) -> tuple[int, int]:
    """``0x`` and 1..4 hex digits at ``pos``: (value, end)."""
    if not _expect(data, pos, b"0x"):
        raise _Reject("hex value without 0x")
    pos += 2
    start = pos
    value = 0
    while pos < len(data) and data[pos] != NL and data[pos] != COMMA:
        if pos - start == 4:
            raise _Reject("hex value too long")
        value = value * 16 + _hex_digit(data[pos])
        pos += 1
    if pos == start:
        raise _Reject("empty hex value")
    return value, pos


def _text(data: bytes, pos: int) -> tuple[list, int]:
    """Unescaped text up to the end of the line: (byte values, end)."""
    out = []
    while pos < len(data) and data[pos] != NL:
        c = data[pos]
        pos += 1
        if c != BACKSLASH:
            out.append(c)
            continue
        if pos >= len(data):
            raise _Reject("dangling backslash")
        e = data[pos]
        pos += 1
        if e == ord("n"):
            out.append(NL)
        elif e == ord("t"):
            out.append(0x09)
        elif e == BACKSLASH:
            out.append(BACKSLASH)
        elif e == ord("x"):
            if pos + 2 > len(data):
                raise _Reject("short \\x escape")
            out.append(_hex_digit(data[pos]) * 16 + _hex_digit(data[pos + 1]))
            pos += 2
        else:
            raise _Reject("unknown escape")
    return out, pos


def _is_lower_alnum(c: int) -> bool:
    return ((c - ord("a")) & 0xFF) < 26 or ((c - ZERO) & 0xFF) < 10


def _identifier(data: bytes, pos: int) -> tuple[list, int]:
    """A user name: a lower-case letter, then up to 15 letters, digits or ``_``."""
    start = pos
    if pos >= len(data) or ((data[pos] - ord("a")) & 0xFF) >= 26:
        raise _Reject("user name must start with a letter")
    while pos < len(data) and (_is_lower_alnum(data[pos]) or data[pos] == ord("_")):
        if pos - start == 16:
            raise _Reject("user name too long")
        pos += 1
    return list(data[start:pos]), pos


def _path(data: bytes, pos: int) -> tuple[list, int]:
    """An absolute path: its segments (``//`` and ``.`` dropped, ``..`` rejected)."""
    if pos >= len(data) or data[pos] != SLASH:
        raise _Reject("root must be an absolute path")
    segments = []
    while pos < len(data) and data[pos] == SLASH:
        pos += 1
        start = pos
        while pos < len(data) and data[pos] != SLASH and data[pos] != NL:
            c = data[pos]
            if not (_is_lower_alnum(c) or c == DOT or c == ord("-") or c == ord("_")):
                raise _Reject("bad character in path")
            pos += 1
        length = pos - start
        if length == 0 or (length == 1 and data[start] == DOT):
            continue  # "//" and "/./"
        if length == 2 and data[start] == DOT and data[start + 1] == DOT:
            raise _Reject("'..' in root path")
        segments.append(list(data[start:pos]))
    return segments, pos


def _server_setting(data: bytes, pos: int, server: dict) -> int:
    if _expect(data, pos, b"name="):
        server["name"], pos = _text(data, pos + 5)
    elif _expect(data, pos, b"port="):
        port, pos = _decimal(data, pos + 5, 65535)
        if port == 0:
            raise _Reject("port 0")
        server["port"] = port
    elif _expect(data, pos, b"mode="):
        if _expect(data, pos + 5, b"ro"):
            server["mode"] = "ro"
        elif _expect(data, pos + 5, b"rw"):
            server["mode"] = "rw"
        else:
            raise _Reject("bad mode")
        pos += 7
    elif _expect(data, pos, b"timeout="):
        value, pos = _decimal(data, pos + 8, 60000)
        if _expect(data, pos, b"ms"):
            server["timeout_ms"] = value
            pos += 2
        elif _expect(data, pos, b"s"):
            server["timeout_ms"] = value * 1000
            pos += 1
        else:
            raise _Reject("timeout without a unit")
    elif _expect(data, pos, b"user="):
        server["user"], pos = _identifier(data, pos + 5)
    elif _expect(data, pos, b"root="):
        server["root"], pos = _path(data, pos + 5)
    elif _expect(data, pos, b"workers="):
        server["workers"], pos = _decimal(data, pos + 8, 64)
        if server["workers"] == 0:
            raise _Reject("no workers")
    else:
        raise _Reject("unknown key")
    return _end_of_line(data, pos)


def _backoff_schedule(retries: int) -> list:
    if retries > len(BACKOFF_MS):  # stands in for the unchecked BACKOFF_MS[i] below
        raise RetryScheduleOverflow(
            f"keyvalue: debug listener with {retries} retries overruns the "
            f"{len(BACKOFF_MS)}-entry back-off table")
    return [BACKOFF_MS[i] for i in range(retries)]


def _digit(data: bytes, pos: int) -> int:
    """The one-digit field at ``pos``."""
    if pos >= len(data):
        raise _Reject("missing digit")
    value = (data[pos] - ZERO) & 0xFF
    if value >= 10:
        raise _Reject("not a digit")
    return value


def _ipv4(data: bytes, pos: int) -> tuple[list, int]:
    """A dotted-quad IPv4 address at ``pos``: (its four octets, end)."""
    octets = []
    for i in range(4):
        if i > 0:
            if pos >= len(data) or data[pos] != DOT:
                raise _Reject("IPv4 address with fewer than four octets")
            pos += 1
        value = digits = 0
        while pos < len(data) and ((data[pos] - ZERO) & 0xFF) < 10:
            value = value * 10 + (data[pos] - ZERO)
            pos += 1
            digits += 1
            if digits > 3:
                raise _Reject("IPv4 octet too long")
        if digits == 0 or value > 255:
            raise _Reject("bad IPv4 octet")
        octets.append(value)
    return octets, pos


def _debug_setting(data: bytes, pos: int, debug: dict) -> int:
    if debug.get("level", 0) > 7:
        debug.setdefault("echo", []).append(pos)  # verbose levels echo every debug line
    if _expect(data, pos, b"level="):
        debug["level"] = _digit(data, pos + 6)
        pos += 7
    elif _expect(data, pos, b"listen="):
        if debug.get("level", 0) < 2:
            raise _Reject("a debug listener needs debug level 2 or more")
        pos += 7
        if _expect(data, pos, b"tcp://"):
            proto = "tcp"
        elif _expect(data, pos, b"udp://"):
            proto = "udp"
        else:
            raise _Reject("listen address without tcp:// or udp://")
        host, pos = _ipv4(data, pos + 6)
        if not _expect(data, pos, b":"):
            raise _Reject("listen address without a port")
        port, pos = _hexadecimal(data, pos + 1)
        retries = 3
        if _expect(data, pos, b","):
            retries = _digit(data, pos + 1)
            pos += 2
        if port < 1024:
            if host == [0, 0, 0, 0]:
                raise _Reject("a privileged debug listener must not bind to all interfaces")
            debug["schedule"] = _backoff_schedule(retries)  # computed up front
        debug["listen"] = (proto, host, port, retries)
    else:
        raise _Reject("unknown debug key")
    return _end_of_line(data, pos)


def _parse(data: bytes) -> tuple[dict, dict]:
    server: dict = {}
    debug: dict = {}
    in_debug = False
    pos = 0
    while pos < len(data):
        if data[pos] == NL:
            pos += 1
        elif data[pos] == HASH:
            while pos < len(data) and data[pos] != NL:
                pos += 1
        elif data[pos] == ord("["):
            if _expect(data, pos, b"[server]"):
                in_debug = False
                pos = _end_of_line(data, pos + 8)
            elif _expect(data, pos, b"[debug]"):
                in_debug = True
                pos = _end_of_line(data, pos + 7)
            else:
                raise _Reject("unknown section")
        elif in_debug:
            pos = _debug_setting(data, pos, debug)
        else:
            pos = _server_setting(data, pos, server)
    return server, debug


_LOG_ESCAPES = {NL: "\\n", 0x09: "\\t", 0x0D: "\\r", BACKSLASH: "\\\\", ord('"'): '\\"'}


def _log_line(data: bytes) -> str:
    """The configuration as one quoted log line: escapes for control and non-ASCII bytes."""
    out = ['"']
    for c in data:
        if c == NL or c == 0x09 or c == 0x0D or c == BACKSLASH or c == ord('"'):
            out.append(_LOG_ESCAPES[c])
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append(f"\\x{c:02x}")
    out.append('"')
    return "".join(out)


def target(data: bytes) -> None:
    try:
        server, debug = _parse(data)
    except _Reject:
        return
    finally:
        _log_line(data)  # every configuration read goes to the audit log, accepted or not
    if server.get("port", 8080) < 1024:
        return  # privileged ports are for debug listeners only
