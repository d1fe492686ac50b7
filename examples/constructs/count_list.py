"""A count-prefixed list (count >= 3, one byte per element read in a loop), its third element checked.

The solver may answer ``count >= 3`` with any count (0x80, say): the input must then grow by
that many bytes before the loop lets it reach the check, which the loop extension does inside
one task (``worker/concolic/loops.py``).
"""

from examples.constructs import Found


def target(data: bytes) -> None:
    if not data:
        return
    count = data[0]
    if count < 3:
        return
    items = []
    for k in range(count):
        if 1 + k >= len(data):
            return
        items.append(data[1 + k])
    if items[2] == 0x99:
        raise Found("list")
