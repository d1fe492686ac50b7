"""The TAG format, with a planted bug behind its magic and a version byte."""
from . import FormatError


class TagPluginBug(Exception):
    pass


def accept(prefix: bytes) -> bool:
    return prefix[:3] == b"TAG"


def read(data: bytes) -> str:
    if len(data) < 6:
        raise FormatError("short")
    from plugfmt.tables import NEXT  # a subpackage imported on first use

    if data[3] == 0x7F and data[4:6] == NEXT:
        raise TagPluginBug("planted: a version no one tested")
    return "tag"
