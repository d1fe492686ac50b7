"""``re.search`` for a key and a test on its group, then ``re.split`` into a number of fields."""

import re

from examples.constructs import Found


def target(data: bytes) -> None:
    text = data.decode("latin-1")
    m = re.search(r"id=([a-z]{2});", text)
    if not m or m.group(1) != "be":
        return
    fields = re.split(",", text)
    if len(fields) == 3:
        raise Found("regex search")
