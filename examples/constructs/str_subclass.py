"""A str subclass and a bytes subclass built from the input (a parser's Source, as tomlkit's)."""

from examples.constructs import Found


class Source(str):
    """The input text with a cursor, as a parser keeps it (str's own constructor builds it)."""

    def __init__(self, _: str) -> None:
        super().__init__()
        self.idx = 0

    def take(self) -> str:
        if self.idx >= len(self):
            return ""
        self.idx += 1
        return self[self.idx - 1]


class Tag(bytes):
    """Bytes with a constructor of its own that calls bytes.__new__ by name."""

    def __new__(cls, raw: bytes) -> "Tag":
        return bytes.__new__(cls, raw)


class Header(bytes):
    def __new__(cls, raw: bytes) -> "Header":
        return super().__new__(cls, raw)


def target(data: bytes) -> None:
    head = Header(data[:2])
    if len(head) < 2 or head[0] != 0x7B or head[1] != 0x21:  # "{!"
        return
    tag = Tag(data)  # built by bytes.__new__ by name: it must still be bytes
    if not tag.startswith(b"{!") or tag[:1] != b"{":
        return
    try:
        src = Source(data[2:].decode("ascii"))
    except UnicodeDecodeError:
        return
    if src.take() == "k" and src.take() == "=" and src.take().isdigit():
        raise Found("str subclass")
