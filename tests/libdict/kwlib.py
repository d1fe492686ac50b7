"""A command parser whose commands are looked up in a table (tests/test_fuzzproc.py, tests/test_libdict.py).

A dict lookup makes no `==` comparison that Atheris could report to libFuzzer: the fuzzer reaches
`_boom` only by writing one of the table's words, which the library's dictionary gives it.
"""


class KeywordBug(Exception):
    pass


def _ok(rest: bytes) -> int:
    return len(rest)


def _boom(rest: bytes) -> int:
    raise KeywordBug("reached through the command table")


COMMANDS = {b"frobnicate-all": _ok, b"xylophonic-mode": _boom, b"quietly-compact": _ok}


def parse(data: bytes) -> int:
    word, _, rest = data.partition(b" ")
    handler = COMMANDS.get(word)
    return handler(rest) if handler is not None else 0
