"""len() and comparisons returned from a helper in another module of the same package."""

from examples.constructs import Found
from examples.constructs._helpers import checksum_ok, has_header


def target(data: bytes) -> None:
    if has_header(data) and data[0] == 0x7F and checksum_ok(data) and data[5] == 0xC3:
        raise Found("helper module")
