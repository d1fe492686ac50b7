"""The regressions folder: each new crash's reproducer kept in the repository, replayed by pytest.

Layout (``tests/fuzz_regressions/`` by default): one folder per target, ``<name>/target.json``
(``{"target": "module:function", "path": "<folder put first on sys.path, relative to this
folder>"}``: a harness file's folder, or the repository root for a config's targets) and one file
per crash, ``crash-<sha1 of the bytes, 16 hex>``. The pytest plugin (``tools/pytest_plugin.py``)
collects every ``crash-*`` file next to a ``target.json`` as one test case: the input replayed in a
fresh interpreter on the plain harness (no MPI, no fuzzing); it fails while the input crashes or
hangs and passes once the bug is fixed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

TARGET_FILE = "target.json"
PREFIX = "crash-"
DEFAULT_FOLDER = Path("tests") / "fuzz_regressions"


@dataclass(frozen=True)
class RegressionTarget:
    """What one regressions folder replays: ``target`` with ``path`` first on ``sys.path``."""

    target: str  # module:function
    path: Path  # absolute

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @classmethod
    def read(cls, folder: Path) -> RegressionTarget:
        spec = json.loads((folder / TARGET_FILE).read_text())
        return cls(spec["target"], (folder / spec["path"]).resolve())


def reproducer_name(data: bytes) -> str:
    return PREFIX + hashlib.sha1(data).hexdigest()[:16]


def write(folder: Path, name: str, spec: RegressionTarget, data: bytes) -> Path:
    """Keep ``data`` as a reproducer of ``spec`` in ``folder/<name>/``; returns its path."""
    home = folder / name
    home.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(spec.path.resolve(), home.resolve())
    (home / TARGET_FILE).write_text(json.dumps({"target": spec.target, "path": rel}, indent=1) + "\n")
    path = home / reproducer_name(data)
    path.write_bytes(data)
    return path


@contextmanager
def on_path(spec: RegressionTarget) -> Iterator[None]:
    """The target's folder first on ``sys.path`` and the working directory (as ``python fuzz_x.py``
    has it: a plain replay's ``python -c`` child puts its working directory first, and
    ``replay_plain`` passes ``sys.path`` on), also for code-under-test lookups."""
    saved, cwd = list(sys.path), os.getcwd()
    folder = str(spec.path.resolve())
    sys.path[:] = [folder, *(p for p in saved if p and p != folder and p != cwd)]
    stem = spec.module
    cached = sys.modules.pop(stem, None)
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(cwd)
        sys.path[:] = saved
        sys.modules.pop(stem, None)
        if cached is not None:
            sys.modules[stem] = cached
