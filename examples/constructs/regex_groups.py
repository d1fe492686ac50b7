"""A regular expression fullmatch on the input text (z3's regex theory), then tests on its groups."""

import re

from examples.constructs import Found

STAMP = re.compile(r"v(\d{3})-([a-z]{2,4})")


def target(data: bytes) -> None:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return
    m = STAMP.fullmatch(text)
    if m is None:
        return
    if int(m.group(1)) == 418 and m.group(2).startswith("zq"):
        raise Found("regex")
