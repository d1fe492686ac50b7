"""The minimize engine's child side: the smallest input with the same crash identity.

Run as ``python -m symfence.worker.childserve symfence.worker.triage.minimize_child ...`` by
``worker.executors.minimize`` (one task per child process, so no target state carries over).
The task (``MinimizeSpec.from_task``): its input and target, the base executor and its options,
and the ``minimize_`` options: kind ("crash"/"hang"), identity (the finding's key), budget_s.
The original input is run first; its identity here is the one kept (the coordinator's is
reported if it differs). Python targets are imported once and called in this process (CPU
time-out by SIGVTALRM, as a fuzz slice); native targets run as a fresh process per input (the
plain build; an ASan/UBSan build's report is compared in full), and ``afl-tmin`` on the afl-cc
build goes first when it is installed. The task's ``Outcome`` carries the minimized input as
its one candidate (``outcome_of``).
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from symfence.protocol.execpath import runnable
from symfence.worker import atheris_compat
from symfence.protocol.crashid import identity_from_detail
from symfence.protocol.pycrash import code_under_test, identity_from_hang, identity_from_python_exception
from symfence.worker.childproc import describe_exit
from symfence.worker.childserve import Events
from symfence.worker.childwire import RunTask
from symfence.worker.engine_api import Candidate, ExitKind, Outcome, Phase, Task
from symfence.worker.hangstack import HangSampler
from symfence.worker.memory_limit import apply_memory_limit, limit_of
from symfence.worker.triage.ddmin import minimize
from symfence.worker.triage.symbolize import is_sanitized, native_detail, run_once

PYTHON_BASES = ("concolic", "fuzz", "hybrid")
PREFIX = "minimize_"  # the task's own options (coordinator/triage.py OPTION_PREFIX)
DIED = "target process"  # an input that ended the process: its detail's first words


@dataclass(frozen=True)
class MinimizeSpec:
    """One minimization task, read from a ``Task`` (the parent and the child read it alike)."""

    target: str
    kind: str  # "crash" or "hang"
    identity: str  # the finding's identity key at the coordinator ("" if unknown)
    executor: str  # the base executor the finding came from
    options: Mapping[str, Any]  # the base executor's options
    data: bytes
    budget_s: float

    @classmethod
    def from_task(cls, task: Task) -> MinimizeSpec:
        """``ValueError`` for a budget that is not a number."""
        opts = dict(task.options)
        own = {k[len(PREFIX):]: opts.pop(k) for k in list(opts) if k.startswith(PREFIX)}
        return cls(task.target, str(own.get("kind", "crash")), str(own.get("identity", "")),
                   str(own.get("executor", "")), opts, task.data, float(own.get("budget_s", 60.0)))

    def as_spec(self) -> dict[str, Any]:
        """The mapping ``run_spec`` takes."""
        return {"target": self.target, "kind": self.kind, "identity": self.identity,
                "executor": self.executor, "options": dict(self.options), "data": self.data.hex(),
                "budget_s": self.budget_s}


class _Timeout(BaseException):
    pass


_sampler = HangSampler()  # as the plain replay (worker/concolic/replay.py): the frames active at every sample


def _on_vtalrm(signum: int, frame: Any) -> None:
    if not _sampler.sample(frame):
        raise _Timeout()


def python_oracle(target: str, exec_timeout_s: float,
                  under_test: frozenset[str] = frozenset()) -> Callable[[bytes], tuple[str, str]]:
    """run(data) -> (outcome, detail): outcome "ok", the crash's identity key, or for a hang
    ``hang`` plus its identity key (the stack it hung in, as the campaign's confirmation takes it)."""
    module_name, _, attr = target.partition(":")
    atheris_compat.plain()  # an OSS-Fuzz harness's libFuzzer-only calls at import: no-ops here
    fn = getattr(importlib.import_module(module_name), attr)
    signal.signal(signal.SIGVTALRM, _on_vtalrm)

    def run(data: bytes) -> tuple[str, str]:
        _sampler.samples.clear()
        signal.setitimer(signal.ITIMER_VIRTUAL, exec_timeout_s, 0.02)
        try:
            fn(data)
        except _Timeout:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            detail = f"execution exceeded {exec_timeout_s:g} s of CPU time\n{_sampler.report()}"
            ident = identity_from_hang(detail, target, under_test)
            return ("hang " + ident.key if ident.has_frames else "hang"), detail
        except BaseException as exc:  # noqa: BLE001 - what the target raises is the crash
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            text = "".join(traceback.format_exception(exc))[-8000:]
            return identity_from_python_exception(exc, target, under_test).key, text
        finally:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        return "ok", ""

    return run


def isolated(run: Callable[[bytes], tuple[str, str]], target: str, under_test: frozenset[str],
             wall_limit_s: float) -> Callable[[bytes], tuple[str, str]]:
    """`run` (a Python oracle) with each input in a forked copy of this process: an input that
    kills the process (a fatal signal in C code, an exit below Python) is a crash with the
    identity of faulthandler's stack, as the campaign's replay gave it, and this process lives on
    to try the next one. A copy that outlives `wall_limit_s` (a hang no CPU timer sees) is
    killed: a hang."""
    def forked(data: bytes) -> tuple[str, str]:
        with tempfile.TemporaryFile() as fatal:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the copy: run, write the outcome, leave without Python's clean-up
                code = 0
                try:
                    os.close(r)
                    faulthandler.enable(file=fatal, all_threads=False)
                    os.write(w, json.dumps(run(data)).encode())  # < 64 KiB: never blocks
                except BaseException:  # noqa: BLE001 - nothing of the copy may go on
                    code = 70
                finally:
                    os._exit(code)
            os.close(w)
            payload, ended, deadline = b"", False, time.monotonic() + wall_limit_s
            with os.fdopen(r, "rb") as pipe:
                while not ended and (left := deadline - time.monotonic()) > 0:
                    if select.select([pipe], [], [], left)[0]:
                        chunk = os.read(pipe.fileno(), 1 << 16)
                        payload += chunk
                        ended = not chunk  # the copy has exited (its end of the pipe closed)
            if not ended:
                os.kill(pid, signal.SIGKILL)
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            if not ended:
                return "hang", f"over {wall_limit_s:g} s of wall time"
            if payload and code == 0:
                outcome, detail = json.loads(payload)
                return str(outcome), str(detail)
            fatal.seek(0)
            dump = fatal.read(8000).decode(errors="replace")
            detail = f"{DIED} {describe_exit(code)} while executing the input\n{dump}"
            return identity_from_detail(detail, target, under_test=under_test).key, detail

    return forked


def native_oracle(binary: str, input_mode: str, exec_timeout_s: float) -> Callable[[bytes], tuple[str, str]]:
    """run(data) -> (outcome, detail): "ok", "hang", or the crash's identity key. A plain build's
    cheap check is its exit signal; only inputs that pass it are re-run under gdb."""
    sanitized = is_sanitized(binary)

    def run(data: bytes) -> tuple[str, str]:
        code, err = run_once(binary, data, input_mode, exec_timeout_s)
        if code == 999:
            return "hang", f"over {exec_timeout_s:g} s"
        if sanitized and "ERROR: " in err or "runtime error:" in err:
            return identity_from_detail(err).key, err[:6000]
        if code >= 0 and not sanitized:
            return "ok", ""
        if sanitized:
            return ("ok", "") if code == 0 else (f"exit {code}", err[:2000])
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else f"SIG{-code}"
        return f"signal:{name}", f"{name}: {os.path.basename(binary)} killed by {name}"

    return run


def afl_tmin(afl_binary: str, data: bytes, input_mode: str, exec_timeout_s: float,
             budget_s: float) -> bytes | None:
    tool = shutil.which("afl-tmin")
    if tool is None or not os.path.exists(afl_binary) or budget_s < 2:
        return None
    with tempfile.TemporaryDirectory(prefix="symfence-tmin-") as tmp:
        src, dst = os.path.join(tmp, "in"), os.path.join(tmp, "out")
        with open(src, "wb") as fh:
            fh.write(data)
        cmd = [tool, "-i", src, "-o", dst, "-t", str(max(int(exec_timeout_s * 1000), 50)), "--", runnable(afl_binary)]
        if input_mode == "file":
            cmd.append("@@")
        env = {**os.environ, "AFL_SKIP_CPUFREQ": "1", "AFL_NO_AFFINITY": "1", "AFL_QUIET": "1",
               "AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES": "1"}
        try:
            subprocess.run(cmd, capture_output=True, timeout=budget_s, env=env, stdin=subprocess.DEVNULL)
        except (subprocess.TimeoutExpired, OSError):
            return None
        try:
            with open(dst, "rb") as fh:
                return fh.read()
        except OSError:
            return None


def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    t0 = time.monotonic()
    deadline = t0 + float(spec["budget_s"])
    data = bytes.fromhex(spec["data"])
    options = spec["options"]
    kind, target = spec["kind"], spec["target"]
    exec_timeout_s = float(options.get("exec_timeout_s", 1.0))
    native = spec["executor"] not in PYTHON_BASES
    if native:
        input_mode = str(options.get("input", "stdin"))
        oracle = native_oracle(target, input_mode, exec_timeout_s)
        want, detail = oracle(data)
    else:
        under_test = code_under_test(target, options)
        oracle = python_oracle(target, exec_timeout_s, under_test)
        # the address-space limit of the replay that confirmed it: an input that is out of memory
        # there allocates freely here without it ("does not reproduce", seen with a 3 GiB bytearray)
        apply_memory_limit(limit_of(options))
        # The original runs in a copy first: if it kills the process, each candidate does too
        # (else they run here, with no fork per input).
        copied = isolated(oracle, target, under_test, 4 * exec_timeout_s + 2)
        want, detail = copied(data)
        if detail.startswith(DIED):
            oracle = copied
    if want == "ok" or (kind == "hang") != want.startswith("hang"):
        return {"not_reproduced": f"the original input does not reproduce here ({want})"}
    gdb_key = ""
    if native and want.startswith("signal:"):  # the plain build: the frames come from gdb
        gdb_key = identity_from_detail(native_detail(target, data, input_mode)).key

    def same(candidate: bytes) -> bool:
        outcome, _ = oracle(candidate)
        if outcome != want:
            return False
        if not gdb_key:
            return True
        return identity_from_detail(native_detail(target, candidate, input_mode)).key == gdb_key

    start, used_tmin = data, False
    if native and kind == "crash":
        afl = str(options.get("afl_target", "{target}.afl")).format(target=target)
        tmin = afl_tmin(afl, data, input_mode, exec_timeout_s, (deadline - time.monotonic()) / 2)
        if tmin and len(tmin) < len(data) and same(tmin):
            start, used_tmin = tmin, True
    best, calls = minimize(start, same, deadline)
    _, best_detail = oracle(best)
    if gdb_key:
        best_detail = f"{best_detail}\n{native_detail(target, best, input_mode)}"
    return {"data": best.hex(), "detail": best_detail or detail, "execs": calls + 2,
            "identity": gdb_key or want, "afl_tmin": used_tmin,
            "mismatch": bool(spec.get("identity")) and spec["identity"] != (gdb_key or want).removeprefix("hang ")}


def outcome_of(spec: MinimizeSpec, result: Mapping[str, Any], wall_s: float) -> Outcome:
    """The task's outcome from ``run_spec``'s result: the minimized input as its one candidate."""
    if "error" in result:
        return Outcome(ExitKind.ERROR, wall_s=wall_s, error=str(result["error"]))
    if "not_reproduced" in result:  # the minimizer's answer, not its failure: no task error (a flaky finding)
        return Outcome(ExitKind.OK, wall_s=wall_s, execs=1, stats={"not_reproduced": 1})
    status = ExitKind.HANG if spec.kind == "hang" else ExitKind.CRASH
    data = bytes.fromhex(result["data"])
    cand = Candidate(data, {}, status, 0, str(result.get("detail", "")))
    stats = {"minimized_from": len(spec.data), "minimized_to": len(data),
             "afl_tmin": int(bool(result.get("afl_tmin"))),
             "identity_mismatch": int(bool(result.get("mismatch")))}
    return Outcome(status, candidates=(cand,), wall_s=wall_s, execs=int(result.get("execs", 1)),
                   error=str(result.get("detail", "")), stats=stats)


class Minimizer:
    """The ``childserve`` handler: runs one minimization per task."""

    def run(self, request: RunTask, events: Events) -> Outcome:
        t0 = time.monotonic()
        spec = MinimizeSpec.from_task(request.task)
        events.entered(Phase.ENGINE)
        try:
            result = run_spec(spec.as_spec())
        except Exception:  # noqa: BLE001 - the task's ERROR, as data
            result = {"error": traceback.format_exc()[-4000:]}
        return outcome_of(spec, result, time.monotonic() - t0)

    def close(self) -> None:
        pass


def handler(scratch_dir: str) -> Minimizer:
    return Minimizer()
