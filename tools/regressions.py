"""The regressions folder: each new crash's reproducer kept in the repository, replayed by pytest.

Layout (``tests/fuzz_regressions/`` by default): one folder per target, ``<name>/target.json``
(``{"target": "module:function", "path": "<folder put first on sys.path, relative to this
folder>", "also": [<folders after it>]}``: a harness file's folder, or the repository root for a
config's targets; ``also``: the repository's ``src/`` and root, for a harness importing its package
without an install) and one file
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
    also: tuple[Path, ...] = ()  # absolute, on sys.path after ``path``

    @property
    def paths(self) -> tuple[Path, ...]:
        return (self.path, *(p for p in self.also if p != self.path))

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @classmethod
    def read(cls, folder: Path) -> RegressionTarget:
        spec = json.loads((folder / TARGET_FILE).read_text())
        also = tuple((folder / p).resolve() for p in spec.get("also", ()))
        return cls(spec["target"], (folder / spec["path"]).resolve(), also)


def reproducer_name(data: bytes) -> str:
    return PREFIX + hashlib.sha1(data).hexdigest()[:16]


def write(folder: Path, name: str, spec: RegressionTarget, data: bytes) -> Path:
    """Keep ``data`` as a reproducer of ``spec`` in ``folder/<name>/``; returns its path."""
    home = folder / name
    home.mkdir(parents=True, exist_ok=True)
    def rel(p: Path) -> str:
        return os.path.relpath(p.resolve(), home.resolve())

    record: dict[str, object] = {"target": spec.target, "path": rel(spec.path)}
    if spec.also:
        record["also"] = [rel(p) for p in spec.also]
    (home / TARGET_FILE).write_text(json.dumps(record, indent=1) + "\n")
    path = home / reproducer_name(data)
    path.write_bytes(data)
    return path


@contextmanager
def on_path(spec: RegressionTarget) -> Iterator[None]:
    """The target's folders first on ``sys.path`` and the first one the working directory (as
    ``python fuzz_x.py`` has it: a plain replay's ``python -c`` child puts its working directory
    first, and ``replay_plain`` passes ``sys.path`` on), also for code-under-test lookups."""
    saved, cwd = list(sys.path), os.getcwd()
    folder = str(spec.path.resolve())
    first = [str(p.resolve()) for p in spec.paths]
    sys.path[:] = [*first, *(p for p in saved if p and p not in first and p != cwd)]
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
