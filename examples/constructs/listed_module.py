"""A standard-library module listed under ``instrument`` decides (email.quoprimime.header_check)."""

from email import quoprimime

from examples.constructs import Found

OPTIONS = {"instrument": "email.quoprimime"}


def target(data: bytes) -> None:
    if len(data) < 3:
        return
    # header_check(octet) is ``chr(octet) != _QUOPRI_HEADER_MAP[octet]``: a table lookup and a
    # comparison inside the standard library, invisible unless that module is rewritten.
    if not quoprimime.header_check(data[0]) and not quoprimime.header_check(data[1]):
        if not quoprimime.header_check(data[2]) and data[0] == 0x2B and data[2] == 0x7A:
            raise Found("listed module")
