"""What the native tests need: the examples built once per session, and skip reasons that name
the missing tool (tritondse from `.[native]`, a C compiler, AFL++ from `make afl`)."""

from __future__ import annotations

import atexit
import functools
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

HAVE_TRITONDSE = importlib.util.find_spec("tritondse") is not None
HAVE_CC = shutil.which("cc") is not None
HAVE_AFL = all(shutil.which(t) for t in ("afl-cc", "afl-showmap", "afl-fuzz"))

needs_tritondse = pytest.mark.skipif(
    not HAVE_TRITONDSE, reason="tritondse is not installed: pip install -e '.[native]' (make test does)")
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler (cc) on PATH")
needs_afl = pytest.mark.skipif(
    not HAVE_AFL, reason="AFL++ (afl-cc, afl-showmap, afl-fuzz) is not installed: `make afl` as root installs it")


@functools.cache
def built() -> Path:
    """examples/native/*.c built into a temporary directory (plain and, with AFL++, .afl)."""
    sys.path.insert(0, str(ROOT))
    from examples.native.build import build

    out = Path(tempfile.mkdtemp(prefix="symfence-native-examples-"))
    atexit.register(shutil.rmtree, out, True)  # one build per test process, removed when it ends
    build(out, afl=HAVE_AFL)
    return out


def compile_c(tmp: Path, name: str, source: str, *flags: str, cc: str = "cc") -> Path:
    src = tmp / f"{name}.c"
    src.write_text(source)
    out = tmp / name
    subprocess.run([cc, "-O1", "-fno-stack-protector", *flags, "-o", str(out), str(src)], check=True)
    return out
