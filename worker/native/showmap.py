"""The afl-showmap oracle: one ``afl-showmap`` process per input (the fallback; ~20 ms a run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import re

from symfence.protocol.execpath import runnable
from symfence.worker.native.base import NativeError, RunKind, RunResult, fold, signal_name

_KILLED = re.compile(rb"Program killed by signal (\d+)")
_TIMED_OUT = b"Program timed off"


def parse_showmap(text: str) -> dict[int, int]:
    """``index:value`` lines (afl-showmap's format) to ``{index: value}``."""
    out: dict[int, int] = {}
    for line in text.splitlines():
        if line.strip():
            index, value = line.split(":")
            out[int(index)] = int(value)
    return out


class ShowmapOracle:
    """Runs ``afl-showmap -r`` (raw counts) once per input."""

    def __init__(self, binary: str, *, args: tuple[str, ...] = (), input_mode: str = "stdin",
                 exec_timeout_s: float = 1.0, mem_limit_mb: int = 0, showmap: str | None = None,
                 raw: bool = True, work_dir: str | None = None):
        self.showmap = showmap or shutil.which("afl-showmap")
        if not self.showmap:
            raise NativeError("afl-showmap is not installed (apt-get install afl++)")
        if not Path(binary).is_file():
            raise NativeError(f"AFL build {binary} does not exist (build it with afl-cc)")
        self.binary = binary
        self.args = args
        self.input_mode = input_mode
        self.exec_timeout_s = exec_timeout_s
        self.mem_limit_mb = mem_limit_mb
        self.raw = raw
        self.map_size = 1 << 16
        self._dir = tempfile.mkdtemp(prefix="symfence-showmap-", dir=work_dir)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("__AFL", "AFL_"))}
        self.env["AFL_NO_UI"] = "1"

    def run(self, data: bytes) -> RunResult:
        inp = os.path.join(self._dir, "input")
        out = os.path.join(self._dir, "map")
        Path(inp).write_bytes(data)
        if os.path.exists(out):
            os.unlink(out)
        argv = [self.showmap, "-o", out, "-t", str(max(1, int(self.exec_timeout_s * 1000))),
                "-m", str(self.mem_limit_mb) if self.mem_limit_mb else "none"]
        if self.raw:
            argv.append("-r")
        target = [runnable(self.binary), *self.args]
        if self.input_mode == "file":
            target = [a for a in target] if "@@" in target else [*target, "@@"]
            argv += ["-H", inp]
        argv += ["--", *target]
        try:
            with open(inp, "rb") as stdin:
                proc = subprocess.run(argv, env=self.env, stdin=stdin if self.input_mode == "stdin"
                                      else subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, timeout=self.exec_timeout_s + 10)
        except subprocess.TimeoutExpired:
            return RunResult(RunKind.HANG, {}, detail=f"afl-showmap over {self.exec_timeout_s:g} s")
        try:
            hits = parse_showmap(Path(out).read_text())
        except FileNotFoundError:
            raise NativeError(f"afl-showmap wrote no map for {self.binary}: "
                              f"{proc.stdout.decode(errors='replace')[-300:]}") from None
        trace: dict[int, int] = {}
        for index, count in hits.items():
            key = fold(index)
            trace[key] = min(255, trace.get(key, 0) + count)
        # afl-showmap exits 2 for both a crash and a time-out; its message tells them apart.
        if _TIMED_OUT in proc.stdout:
            return RunResult(RunKind.HANG, trace, detail=f"over {self.exec_timeout_s:g} s")
        killed = _KILLED.search(proc.stdout)
        if killed or proc.returncode == 2:
            sig = int(killed.group(1)) if killed else 0
            name = signal_name(sig) if sig else "CRASH"
            return RunResult(RunKind.CRASH, trace, signal=sig,
                             detail=f"{name}: {Path(self.binary).name} killed by {name}")
        return RunResult(RunKind.OK, trace)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)
