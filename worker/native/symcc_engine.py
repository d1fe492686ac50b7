"""The SymCC engine: run a SymCC-built binary (or any command following SymCC's environment
contract) on one input and take the files it writes to ``SYMCC_OUTPUT_DIR`` as candidates.

Contract: the input comes from ``SYMCC_INPUT_FILE`` (``@@`` in the command line is replaced by
that file) or stdin; ``SYMCC_OUTPUT_DIR`` is fresh per run and created beforehand;
``SYMCC_AFL_COVERAGE_MAP`` names a map file private to this engine (one per worker) that the
binary reads and updates across runs. The run has a wall-clock limit; on expiry the whole
process group is killed. SymCC has no generational bound: candidates carry none.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from symfence.protocol.execpath import runnable
from symfence.worker.native.base import EngineRun, GeneratedInput, NativeError, NativeOptions, RunKind, RunResult, signal_name


class SymccEngine:
    def __init__(self, target: str, options: NativeOptions, *, work_dir: str | None = None,
                 on_spawn: Callable[[int], None] | None = None):
        self.argv = options.symcc_argv(target)
        if not self.argv or not (Path(self.argv[0]).is_file() or shutil.which(self.argv[0])):
            raise NativeError(f"SymCC command {options.symcc_command!r} for {target}: "
                              f"{self.argv[0] if self.argv else '(empty)'} not found (build it with symcc)")
        self.argv[0] = runnable(self.argv[0])
        self.options = options
        self.on_spawn = on_spawn or (lambda pgid: None)
        self._dir = tempfile.mkdtemp(prefix="symfence-symcc-", dir=work_dir)
        self.coverage_map = os.path.join(self._dir, "afl_coverage_map")  # private to this engine
        self.input_path = os.path.join(self._dir, "input")
        self.runs = 0

    def explore(self, data: bytes, bound: int) -> EngineRun:
        self.runs += 1
        out_dir = os.path.join(self._dir, f"out-{self.runs}")
        os.mkdir(out_dir)  # fresh per run, created before the binary starts
        Path(self.input_path).write_bytes(data)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SYMCC_")}
        env.update(SYMCC_OUTPUT_DIR=out_dir, SYMCC_AFL_COVERAGE_MAP=self.coverage_map)
        argv = list(self.argv)
        if self.options.input == "file":
            env["SYMCC_INPUT_FILE"] = self.input_path
            argv = [self.input_path if a == "@@" else a for a in argv]
        started = time.monotonic()
        with open(self.input_path, "rb") as stdin:
            proc = subprocess.Popen(argv, env=env, stdin=stdin if self.options.input == "stdin" else subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.on_spawn(proc.pid)
        timed_out = False
        try:
            code = proc.wait(timeout=self.options.engine_timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the whole group: SymCC may have forked
            except ProcessLookupError:
                pass
            code = proc.wait()
        finally:
            self.on_spawn(0)
        names = sorted(p for p in os.listdir(out_dir) if not p.startswith("."))
        candidates = []
        for name in names[: self.options.max_candidates]:
            candidates.append(GeneratedInput(Path(out_dir, name).read_bytes(), None))
        shutil.rmtree(out_dir, ignore_errors=True)
        if timed_out:
            own = RunResult(RunKind.HANG, {}, detail=f"SymCC run over {self.options.engine_timeout_s:g} s")
        elif code < 0:
            own = RunResult(RunKind.CRASH, {}, signal=-code,
                            detail=f"{signal_name(-code)}: SymCC build killed by {signal_name(-code)}")
        else:
            own = RunResult(RunKind.OK, {}, exit_code=code)
        return EngineRun(tuple(candidates), own, time.monotonic() - started, 1,
                         {"generated": len(names), "symcc_timeouts": int(timed_out)})

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)
