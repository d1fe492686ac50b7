"""Reads a libFuzzer/AFL dictionary file (``-dict=FILE``, ``fuzz.dict``) into its tokens."""

from __future__ import annotations

import re
from pathlib import Path

_LINE = re.compile(r'^(?:[A-Za-z0-9_]+(?:@\d+)?\s*=\s*)?"(.*)"$')


class DictionaryError(Exception):
    """The file cannot be read or a line is not ``name="value"`` / ``"value"``."""


def _unescape(body: str, where: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("latin-1", "replace")
            i += 1
            continue
        nxt = body[i + 1:i + 2]
        if nxt in ("\\", '"'):
            out += nxt.encode()
            i += 2
        elif nxt == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", body[i + 2:i + 4]):
            out.append(int(body[i + 2:i + 4], 16))
            i += 4
        else:
            raise DictionaryError(f"{where}: bad escape in {body!r}")
    return bytes(out)


def read_tokens(path: Path) -> list[bytes]:
    """The tokens of a dictionary file, in order (comments and blank lines skipped)."""
    try:
        text = path.read_text(encoding="latin-1")
    except OSError as exc:
        raise DictionaryError(f"cannot read {path}: {exc.strerror or exc}") from None
    tokens = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            raise DictionaryError(f"{path} line {n}: not name=\"value\" or \"value\": {line[:60]!r}")
        token = _unescape(m.group(1), f"{path} line {n}")
        if token:
            tokens.append(token)
    return tokens
