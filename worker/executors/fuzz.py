"""The fuzz Executor: one task = one time slice of Atheris (libFuzzer) on one target, in a child process.

The WORK's data is a ``protocol.fuzzslice`` spec: corpus entries and dictionary tokens this
worker does not have yet for that target. The executor keeps, per target, a corpus folder (every
entry the coordinator sent plus every input its own slices kept) and a dictionary, so a slice
never resends the whole queue. A slice runs ``worker.fuzz.slice_child`` in a
``worker.childproc.ChildProcess`` (its stderr is libFuzzer's log) for ``slice_s`` seconds of fuzzing (start-up not counted); Python exceptions and CPU time-outs are
caught inside (the run goes on), and when something Python cannot catch ends the process early
(native crash, native hang past libFuzzer's ``-timeout``, out of memory) the executor keeps
libFuzzer's artifact, drops that input from the corpus and starts the child again for the rest
of the slice (no restart after twice the slice length plus 10 s of wall time, start-ups
excluded, or 50 restarts). The outcome's candidates are every input libFuzzer kept
in this slice (OK), and every crash and hang (CRASH / HANG with their traceback). Traces are
filled in by ``TracedExecutor`` (the real tracer), not here.

Options (``Task.options``): ``slice_s``, ``exec_timeout_s``, ``max_len``, ``max_candidates``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from symfence.protocol.fuzzslice import unpack_spec
from symfence.protocol.options import FuzzOptions
from symfence.worker import childwire as wire
from symfence.worker.childproc import ChildProcess
from symfence.worker.engine_api import CandidateOut, Executor, ExitKind, Outcome, Task

_ENGINE = "symfence.worker.fuzz.slice_child"
_MIN_RUN_S = 1  # libFuzzer's -max_total_time is whole seconds; less is not worth a restart
_RESTART_ALLOWANCE_S = 10.0  # wall time (start-ups excluded) beyond twice the slice length
_MAX_RESTARTS = 50
_START_GRACE_S = 30.0  # import + instrumentation + corpus load before the slice clock matters
_ARTIFACT_KINDS = {"crash": ExitKind.CRASH, "oom": ExitKind.CRASH, "leak": ExitKind.CRASH,
                   "timeout": ExitKind.HANG}
_MAX_RESULT_BYTES = 4 << 20  # kept inputs per RESULT (the rest stay in this worker's corpus)
_FINAL_EXECS = re.compile(rb"stat::number_of_executed_units:\s*(\d+)")


def _dict_line(i: int, token: bytes) -> str:
    body = "".join(chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else f"\\x{b:02x}" for b in token)
    return f'kw{i}="{body}"\n'


_FAULT_FRAME = re.compile(r'^\s*File "(.*)", line (\d+) in (.*)$')
# symfence's slice child (worker/fuzz/), whose frames are not the target's: judged by where the
# package is (both spellings: the checkout's symlink and the real folder), not by path substrings.
_FUZZ_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz") + os.sep
_FUZZ_DIRS = (_FUZZ_DIR, os.path.realpath(_FUZZ_DIR) + os.sep)


def _in_fuzz_dir(path: str) -> bool:
    return path.startswith(_FUZZ_DIRS) or os.path.realpath(path).startswith(_FUZZ_DIRS)


def native_detail(kind: str, log: str) -> str:
    """A traceback-shaped description of what ended a fuzzing process (for crash signatures):
    the Python stack faulthandler printed (innermost last) and libFuzzer's error line."""
    lines = log.splitlines()
    error = next((l.split("ERROR: ", 1)[1] for l in lines if "ERROR: libFuzzer:" in l), f"libFuzzer: {kind}")
    fatal = next((l for l in lines if l.startswith("Fatal Python error:")), "")
    frames: list[str] = []
    for l in lines[next((i for i, l in enumerate(lines) if l.startswith("Fatal Python error:")), len(lines)):]:
        m = _FAULT_FRAME.match(l)
        if m:
            frames.append(f'  File "{m.group(1)}", line {m.group(2)}, in {m.group(3)}')
        elif frames and not l.strip():
            break
    frames = [f for f in reversed(frames) if not _in_fuzz_dir(f.split('"')[1])]
    name = {"crash": "NativeCrash", "oom": "OutOfMemory", "leak": "NativeLeak", "timeout": "NativeHang"}.get(kind, "NativeCrash")
    text = "Traceback (most recent call last):\n" + "".join(f + "\n" for f in frames)
    return text + f"{name}: {error}" + (f" ({fatal})" if fatal else "") + "\n"


@dataclass
class _TargetState:
    corpus: Path
    dictionary: Path
    tokens: list[bytes] = field(default_factory=list)
    token_set: set[bytes] = field(default_factory=set)


@dataclass
class _Slice:
    task: Task
    options: FuzzOptions
    state: _TargetState
    folder: Path
    started: float
    fuzz_s: float = 0.0  # fuzzing time used so far (from each run's first execution to its end)
    proc: ChildProcess | None = None
    run_started: float = 0.0
    run_budget: float = 0.0  # this run's -max_total_time
    first_exec: float | None = None  # this run's first execution (monotonic), from the child
    counted: int = 0  # this run's executions as the child last counted them
    startup_s: float = 0.0  # the runs' start-ups (import, instrumentation): not slice time
    runs: int = 0
    restarts: int = 0
    execs: int = 0
    cpu_s: float = 0.0
    artifacts: list[CandidateOut] = field(default_factory=list)


class FuzzExecutor:
    """Executor for Atheris fuzz slices; see the module docstring."""

    def __init__(self, *, python: str | None = None, workdir: str | None = None):
        self._python = python or sys.executable
        self._root = Path(tempfile.mkdtemp(prefix="symfence-fuzz-", dir=workdir))
        self._targets: dict[str, _TargetState] = {}
        self._run: _Slice | None = None
        self._ready: Outcome | None = None
        self._seq = 0

    # -- Executor protocol --------------------------------------------------------------------

    def start(self, task: Task) -> None:
        self._ready = None
        try:
            options = FuzzOptions.from_mapping(task.options)
            spec = unpack_spec(task.data)
        except ValueError as exc:
            self._ready = Outcome(ExitKind.ERROR, error=f"bad fuzz slice: {exc}")
            return
        state = self._target(task.target)
        for entry in spec.entries:
            path = state.corpus / hashlib.sha1(entry).hexdigest()
            if not path.exists():
                path.write_bytes(entry)
        new_tokens = [t for t in spec.tokens if t not in state.token_set]
        if new_tokens:
            state.tokens.extend(new_tokens)
            state.token_set.update(new_tokens)
            with state.dictionary.open("a") as fh:
                for i, token in enumerate(new_tokens, len(state.tokens) - len(new_tokens)):
                    fh.write(_dict_line(i, token))
        self._seq += 1
        folder = self._root / f"slice-{self._seq}"
        for sub in ("new", "found", "artifacts"):
            (folder / sub).mkdir(parents=True)
        self._run = _Slice(task, options, state, folder, time.monotonic())
        self._launch(self._run)

    def wait(self, timeout_s: float) -> Outcome | None:
        if self._ready is not None:
            outcome, self._ready = self._ready, None
            return outcome
        run = self._run
        if run is None:
            return None
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            assert run.proc is not None
            ended = run.proc.exited() is not None
            self._drain(run)  # after the exit check: what it sent before exiting is all there
            if ended:
                run.cpu_s += run.proc.cpu_s
                return self._run_ended(run)
            now = time.monotonic()
            if now > run.run_started + run.run_budget + _START_GRACE_S + 2 * run.options.exec_timeout_s:
                self._kill(run)  # libFuzzer did not stop on its own: a backstop, not the plan
                return self._run_ended(run, killed=True)
            if now >= deadline:
                return None
            time.sleep(min(0.01, deadline - now))

    def _drain(self, run: _Slice) -> None:
        """Take in what the child streamed: its first execution and its execution count."""
        proc = run.proc
        assert proc is not None
        try:
            while proc.poll(0):
                message = proc.recv()
                if isinstance(message, wire.Entered) and run.first_exec is None:
                    run.first_exec = message.since
                elif isinstance(message, wire.Counted):
                    run.counted = message.execs
                elif isinstance(message, wire.Done):  # the harness failed before fuzzing
                    with (run.folder / "log").open("a") as log:
                        log.write(message.outcome.error)
                    proc.kill_group()
        except (EOFError, OSError):
            return  # it ended: the exit check sees it
        except wire.ChildProtocolError as exc:
            with (run.folder / "log").open("a") as log:
                log.write(f"fuzz child sent a malformed message: {exc}\n")
            proc.kill_group()

    def abort(self) -> None:
        run, self._run = self._run, None
        self._ready = None
        if run is not None:
            self._kill(run)
            shutil.rmtree(run.folder, ignore_errors=True)

    def close(self) -> None:
        self.abort()
        shutil.rmtree(self._root, ignore_errors=True)

    # -- one slice ----------------------------------------------------------------------------

    def _target(self, target: str) -> _TargetState:
        state = self._targets.get(target)
        if state is None:
            folder = self._root / hashlib.sha256(target.encode()).hexdigest()[:16]
            (folder / "corpus").mkdir(parents=True)
            state = self._targets[target] = _TargetState(folder / "corpus", folder / "dictionary")
        return state

    def _launch(self, run: _Slice) -> None:
        opts = run.options
        remaining = max(_MIN_RUN_S, round(opts.slice_s - run.fuzz_s))
        run.run_budget = remaining
        args = [str(run.folder / "new"), str(run.state.corpus), f"-max_total_time={remaining}",
                f"-timeout={int(2 * opts.exec_timeout_s) + 1}",
                f"-artifact_prefix={run.folder / 'artifacts'}{os.sep}", "-print_final_stats=1",
                f"-rss_limit_mb={opts.rss_limit_mb}"]
        if opts.max_len:  # and no gradual length control: its ramp would restart with every slice
            args += [f"-max_len={opts.max_len}", "-len_control=0"]
        if run.state.tokens:
            args.append(f"-dict={run.state.dictionary}")
        options = {"libfuzzer_args": args, "found_dir": str(run.folder / "found"),
                   "exec_timeout_s": opts.exec_timeout_s}
        run.proc = ChildProcess(_ENGINE, python=self._python, stderr=str(run.folder / "log"))
        run.run_started, run.first_exec, run.counted = time.monotonic(), None, 0
        run.runs += 1
        try:
            run.proc.send(wire.RunTask(Task(run.task.token, run.task.work_id, b"", run.task.target,
                                            options=options), tuple(sys.path)))
        except OSError:
            pass  # it died at once: the exit check sees it

    @staticmethod
    def _kill(run: _Slice) -> None:
        proc = run.proc
        if proc is not None and proc.returncode is None:
            proc.close()
            run.cpu_s += proc.cpu_s

    def _run_ended(self, run: _Slice, *, killed: bool = False) -> Outcome | None:
        log = (run.folder / "log").read_bytes()
        run_log = log[log.rfind(b"INFO: Seed:"):] if b"INFO: Seed:" in log else log
        run.proc.close()  # the pipes (it has exited, or was killed)
        final = _FINAL_EXECS.findall(run_log)
        run.execs += max(run.counted, int(final[-1]) if final else 0)
        early = False
        for path in sorted((run.folder / "artifacts").iterdir()):
            kind = _ARTIFACT_KINDS.get(path.name.split("-", 1)[0])
            if kind is None:
                path.unlink()
                continue
            detail = native_detail(path.name.split("-", 1)[0], run_log.decode(errors="replace"))
            data = path.read_bytes()
            run.artifacts.append(CandidateOut(data, {}, kind, 0, detail))
            path.unlink()
            # A corpus file that kills the process would kill every restart while loading the
            # corpus: it leaves the fuzzer's corpus (it is reported as a finding instead).
            sha1 = hashlib.sha1(data).hexdigest()
            for folder in (run.state.corpus, run.folder / "new"):
                (folder / sha1).unlink(missing_ok=True)
            early = True
        if killed:
            early = True
        hangs_list = run.folder / "found" / "hangs.list"
        if hangs_list.exists():  # inputs that hung cost their time-out at every corpus load
            for sha1 in hangs_list.read_text().split():
                (run.state.corpus / sha1).unlink(missing_ok=True)
        # The child's first execution: start-up is not slice time. If it never ran an input
        # (import error, ...), a restart won't either.
        ran = run.first_exec is not None
        if run.first_exec is not None:
            run.startup_s += max(0.0, run.first_exec - run.run_started)
            run.fuzz_s += max(0.0, time.monotonic() - run.first_exec)
        remaining = run.options.slice_s - run.fuzz_s
        # Start-up is not slice time, but restarts are not free: the wall clock caps them.
        wall = time.monotonic() - run.started - run.startup_s
        in_time = wall < 2 * run.options.slice_s + _RESTART_ALLOWANCE_S and run.restarts < _MAX_RESTARTS
        if ran and in_time and (early or run.proc.returncode != 0) and remaining >= _MIN_RUN_S:
            run.restarts += 1
            self._launch(run)
            return None
        self._run = None
        return self._finish(run, log)

    def _finish(self, run: _Slice, log: bytes) -> Outcome:
        opts = run.options
        kept = sorted((run.folder / "new").iterdir(), key=lambda p: p.stat().st_mtime_ns)
        hangs_list = run.folder / "found" / "hangs.list"
        hung = set(hangs_list.read_text().split()) if hangs_list.exists() else set()
        candidates: list[CandidateOut] = []
        size = 0
        for path in kept:
            data = path.read_bytes()
            if path.name in hung:  # reported below (or a duplicate of a reported hang)
                path.unlink()
                continue
            if len(candidates) < opts.max_candidates and size + len(data) <= _MAX_RESULT_BYTES:
                candidates.append(CandidateOut(data, {}, ExitKind.OK, 0))
                size += len(data)
            os.replace(path, run.state.corpus / path.name)  # the next slice starts from it too
        found = 0
        for path in sorted((run.folder / "found").iterdir()):
            if path.suffix in (".txt", ".list"):
                continue
            kind = ExitKind.CRASH if path.name.startswith("crash-") else ExitKind.HANG
            detail_path = path.with_name(path.name + ".txt")
            detail = detail_path.read_text(errors="replace") if detail_path.exists() else ""
            candidates.append(CandidateOut(path.read_bytes(), {}, kind, 0, detail))
            found += 1
        candidates.extend(run.artifacts)
        error = ""
        status = ExitKind.OK
        if run.execs == 0 and not candidates:
            status = ExitKind.ERROR  # the target never ran: say why (import error, bad target)
            error = "fuzz slice ran no input:\n" + log.decode(errors="replace")[-4000:]
        shutil.rmtree(run.folder, ignore_errors=True)
        stats = {"fuzz_slices": 1, "fuzz_runs": run.runs, "fuzz_restarts": run.restarts,
                 "fuzz_kept": len(kept), "fuzz_findings": found + len(run.artifacts),
                 "fuzz_corpus": sum(1 for _ in run.state.corpus.iterdir())}
        return Outcome(status, {}, tuple(candidates), wall_s=time.monotonic() - run.started,
                       cpu_s=run.cpu_s, execs=run.execs, error=error, stats=stats)


def executor() -> Executor:
    """The WORK executor "fuzz": slices, their inputs measured by the real tracer."""
    from symfence.worker.executors.traced import TracedExecutor

    return TracedExecutor(FuzzExecutor(), trace_input=False)
