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
