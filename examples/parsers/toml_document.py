"""Harness: ``tomllib`` parsing a TOML document (bytes decoded as UTF-8, as ``tomllib.load`` does).

Documented errors: ``tomllib.TOMLDecodeError`` for invalid TOML and ``UnicodeDecodeError`` for
bytes that are not UTF-8.
"""

import tomllib

MODULES = ("tomllib",)


def target(data: bytes) -> None:
    try:
        tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        pass
