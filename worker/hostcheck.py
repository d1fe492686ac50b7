"""A worker checks that the files rank 0 listed in its SETUP are on this host, with the same content."""

from __future__ import annotations

import hashlib
from typing import Mapping


def verify(files: Mapping[str, str]) -> tuple[int, str] | None:
    """The first problem as (1-based index in sorted path order, "missing" or "differs"), or None."""
    for i, path in enumerate(sorted(files), 1):
        try:
            with open(path, "rb") as fh:
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
        except OSError:
            return i, "missing"
        if digest != files[path]:
            return i, "differs"
    return None
