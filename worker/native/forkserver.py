"""The AFL++ forkserver oracle: run inputs on an afl-cc build through its forkserver (fds 198/199,
``__AFL_SHM_ID`` shared map, the 4.x options handshake with the map size) at ~0.5 ms a run."""

from __future__ import annotations

import os
import select
import signal
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from symfence.protocol.execpath import runnable
from symfence.worker.native.base import NativeError, RunKind, RunResult, fold, signal_name
from symfence.worker.native.shm import SharedMap

FORKSRV_FD = 198
FS_OPT_ENABLED = 0x80000001
FS_OPT_MAPSIZE = 0x40000000
FS_OPT_SHDMEM_FUZZ = 0x01000000
FS_OPT_AUTODICT = 0x10000000
MIN_MAP = 1 << 16
MAX_MAP = 1 << 23


def map_size_of(status: int) -> int | None:
    if (status & FS_OPT_ENABLED) == FS_OPT_ENABLED and status & FS_OPT_MAPSIZE:
        return ((status & 0x00FFFFFE) >> 1) + 1
    return None


def dumped_map_size(binary: str, env: dict[str, str]) -> int:
    """The map size an AFL++ build needs (``AFL_DUMP_MAP_SIZE=1`` makes it print it and exit)."""
    try:
        out = subprocess.run([runnable(binary)], env={**env, "AFL_DUMP_MAP_SIZE": "1"}, stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NativeError(f"cannot run the AFL build {binary}: {exc}") from None
    return int(out) if out.isdigit() else MIN_MAP


class ForkserverOracle:
    """One forkserver per target build, started lazily and restarted if it dies."""

    def __init__(self, binary: str, *, args: tuple[str, ...] = (), input_mode: str = "stdin",
                 exec_timeout_s: float = 1.0, mem_limit_mb: int = 0, work_dir: str | None = None):
        if not Path(binary).is_file():
            raise NativeError(f"AFL build {binary} does not exist (build it with afl-cc)")
        self.binary = binary
        self.args = args
        self.input_mode = input_mode
        self.exec_timeout_s = exec_timeout_s
        self.mem_limit_mb = mem_limit_mb
        self._dir = tempfile.mkdtemp(prefix="symfence-fsrv-", dir=work_dir)
        self.input_path = os.path.join(self._dir, ".cur_input")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("__AFL", "AFL_"))}
        self.env.update(ASAN_OPTIONS="abort_on_error=1:symbolize=0:detect_leaks=0",
                        UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1")
        self.map_size = max(MIN_MAP, dumped_map_size(binary, self.env))
        if self.map_size > MAX_MAP:
            raise NativeError(f"{binary} needs a {self.map_size}-byte AFL map (over {MAX_MAP})")
        self.shm = SharedMap(self.map_size)
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    # -- lifecycle ----------------------------------------------------------------------------

    def _argv(self) -> list[str]:
        argv = [runnable(self.binary), *self.args]
        if self.input_mode == "file":
            argv = [self.input_path if a == "@@" else a for a in argv]
            if self.input_path not in argv:
                argv.append(self.input_path)
        return argv

    def _start(self) -> None:
        ctl_r, ctl_w = os.pipe()
        st_r, st_w = os.pipe()
        self._input_fd = os.open(self.input_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        limit = self.mem_limit_mb

        def child_setup() -> None:
            if limit:
                import resource
                resource.setrlimit(resource.RLIMIT_AS, (limit << 20, limit << 20))

        # The target expects its pipes at fds 198/199: place them there for the spawn only.
        os.dup2(ctl_r, FORKSRV_FD)
        os.dup2(st_w, FORKSRV_FD + 1)
        os.close(ctl_r)
        os.close(st_w)

        env = {**self.env, "__AFL_SHM_ID": str(self.shm.shm_id), "AFL_MAP_SIZE": str(self.map_size)}
        stdin = self._input_fd if self.input_mode == "stdin" else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(self._argv(), env=env, stdin=stdin, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, preexec_fn=child_setup,
                                         pass_fds=(FORKSRV_FD, FORKSRV_FD + 1), close_fds=True)
        finally:
            os.close(FORKSRV_FD)
            os.close(FORKSRV_FD + 1)
        self._ctl, self._st = ctl_w, st_r
        self.starts += 1
        status = self._read_u32(10.0, "the forkserver handshake")
        if status is None:
            self._stop()
            raise NativeError(f"{self.binary} did not start an AFL++ forkserver (is it an afl-cc build?)")
        size = map_size_of(status)
        if size is not None and size > self.map_size:
            self._stop()
            raise NativeError(f"{self.binary} reports a {size}-byte map, larger than {self.map_size}")
        if (status & FS_OPT_ENABLED) == FS_OPT_ENABLED and status & FS_OPT_SHDMEM_FUZZ:
            self._stop()
            raise NativeError(f"{self.binary} wants shared-memory test cases (__AFL_FUZZ_TESTCASE_BUF), "
                              "which this oracle does not provide; build a file/stdin harness")
        if (status & FS_OPT_ENABLED) == FS_OPT_ENABLED and status & FS_OPT_AUTODICT:
            os.write(self._ctl, struct.pack("<I", FS_OPT_ENABLED | FS_OPT_AUTODICT))
            length = self._read_u32(10.0, "the dictionary length")
            remaining = length or 0
            while remaining > 0:  # the auto-dictionary: read and drop (afl-fuzz uses it, we do not)
                chunk = self._read_exact(remaining, 10.0)
                if not chunk:
                    break
                remaining -= len(chunk)

    def _stop(self) -> None:
        if self.proc is None:
            return
        for fd in (self._ctl, self._st, self._input_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc = None

    def close(self) -> None:
        self._stop()
        self.shm.close()
        for name in os.listdir(self._dir):
            os.unlink(os.path.join(self._dir, name))
        os.rmdir(self._dir)

    # -- pipe helpers -------------------------------------------------------------------------

    def _read_exact(self, n: int, timeout_s: float) -> bytes | None:
        buf = b""
        deadline = time.monotonic() + timeout_s
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._st], [], [], left)[0]:
                return None
            chunk = os.read(self._st, n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def _read_u32(self, timeout_s: float, what: str) -> int | None:
        raw = self._read_exact(4, timeout_s)
        return None if raw is None else struct.unpack("<I", raw)[0]

    # -- Oracle -------------------------------------------------------------------------------

    def run(self, data: bytes) -> RunResult:
        for attempt in range(2):
            if self.proc is None or self.proc.poll() is not None:
                self._stop()
                self._start()
            result = self._run_once(data)
            if result is not None:
                return result
            self._stop()  # the forkserver itself died: restart it once
        raise NativeError(f"the forkserver of {self.binary} keeps dying")

    def _run_once(self, data: bytes) -> RunResult | None:
        os.lseek(self._input_fd, 0, os.SEEK_SET)
        os.ftruncate(self._input_fd, 0)
        os.write(self._input_fd, data)
        os.lseek(self._input_fd, 0, os.SEEK_SET)
        self.shm.clear()
        try:
            os.write(self._ctl, b"\0\0\0\0")
        except BrokenPipeError:
            return None
        pid = self._read_u32(5.0, "the child pid")
        if pid is None or pid <= 0:
            return None
        timed_out = False
        raw = self._read_exact(4, self.exec_timeout_s)
        if raw is None:
            timed_out = True
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            raw = self._read_exact(4, 5.0)
            if raw is None:
                return None
        status = struct.unpack("<I", raw)[0]
        trace: dict[int, int] = {}
        for index, count in self.shm.hits().items():
            key = fold(index)
            trace[key] = min(255, trace.get(key, 0) + count)
        if timed_out:
            return RunResult(RunKind.HANG, trace, detail=f"over {self.exec_timeout_s:g} s")
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            return RunResult(RunKind.CRASH, trace, signal=sig,
                             detail=f"{signal_name(sig)}: {Path(self.binary).name} killed by {signal_name(sig)}")
        return RunResult(RunKind.OK, trace, exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else 0)
