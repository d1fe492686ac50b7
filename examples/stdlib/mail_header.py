"""Harness: ``email.header.decode_header`` on the input decoded as Latin-1 (instrument ``email.header``)."""

from email.errors import HeaderParseError
from email.header import decode_header


def target(data: bytes) -> None:
    try:
        decode_header(data.decode("latin-1"))
    except HeaderParseError:
        pass
