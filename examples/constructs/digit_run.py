"""An integer parsed from a run of ASCII digits (scanned with isdigit) and compared, then a separator."""

from examples.constructs import Found


def target(data: bytes) -> None:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return
    end = 0
    while end < len(text) and text[end].isdigit():
        end += 1
    if end == 0:
        return
    port = int(text[:end])
    if port == 8443 and text[end:end + 1] == ":":
        raise Found("digits")
