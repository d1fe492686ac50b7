"""bytes startswith, endswith, find, index, split, partition, strip and byte classes (data[0] in b"\\t ")."""

from examples.constructs import Found


def target(data: bytes) -> None:
    if not data or data[0] not in b"\t ":
        return
    line = data.strip()
    if not line.startswith(b"SET "):
        return
    key, sep, value = line[4:].partition(b"=")
    if sep and key.strip() == b"k" and value.find(b",") == 1:
        parts = value.split(b",")
        if len(parts) == 3 and parts[2].endswith(b";") and b"z" in value and value.index(b"z") == 4:
            raise Found("bytes methods")
