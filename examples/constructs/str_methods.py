"""bytes.decode to str: str comparisons, startswith, find, split, strip, isdigit and int(str)."""

from examples.constructs import Found


def target(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    if not text.startswith("v="):
        return
    fields = text[2:].split(";")
    if len(fields) != 2 or fields[0].strip() != "ok":
        return
    number = fields[1]
    if len(number) == 4 and number.isdigit() and int(number) == 1337 and text.find("k") == 3:
        raise Found("str")
