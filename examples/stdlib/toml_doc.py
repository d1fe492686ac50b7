"""Harness: ``tomllib.loads`` on the input decoded as UTF-8 (instrument ``tomllib._parser``)."""

import tomllib


def target(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        pass
