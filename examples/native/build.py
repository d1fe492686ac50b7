"""Build the native examples: ``<name>`` with the system C compiler (for TritonDSE) and, when
``afl-cc`` is installed, ``<name>.afl`` (for the forkserver / afl-showmap oracles and afl-fuzz).

    python -m examples.native.build [OUT_DIR]     (default: examples/native/build)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = sorted(HERE.glob("*.c"))


def build(out_dir: Path, *, afl: bool = True) -> dict[str, Path]:
    """Compile every example; returns {name: plain binary path}. AFL builds sit next to them."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise FileNotFoundError("no C compiler (cc, gcc or clang) on PATH")
    afl_cc = shutil.which("afl-cc") if afl else None
    built = {}
    for src in SOURCES:
        plain = out_dir / src.stem
        # Dynamic glibc, no stack protector or FORTIFY (symbols TritonDSE would have to model).
        flags = ["-O1", "-g", "-fno-stack-protector", "-U_FORTIFY_SOURCE", "-D_FORTIFY_SOURCE=0"]
        subprocess.run([cc, *flags, "-o", str(plain), str(src)], check=True)
        if afl_cc:
            subprocess.run([afl_cc, *flags, "-o", f"{plain}.afl", str(src)], check=True,
                           env={**__import__("os").environ, "AFL_QUIET": "1"}, capture_output=True)
        built[src.stem] = plain
    return built


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "build"
    for name, path in build(out).items():
        print(f"{name}: {path}" + (" (+ .afl)" if Path(f"{path}.afl").exists() else ""))
