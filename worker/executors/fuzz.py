"""The fuzz Executor: one long-lived Atheris (libFuzzer) process per target, one task = one turn of it.

The first fuzz WORK of a target starts ``worker.fuzz.live_child`` in a ``ChildProcess`` (its
stderr is libFuzzer's log); it then runs for the whole campaign: the instrumented import and the
corpus load are paid once. A WORK (a *turn*) carries a ``protocol.fuzzslice`` spec, the corpus
entries and dictionary tokens this worker does not have yet for that target. The turn drops the
entries into the process's corpus folder (libFuzzer's first folder: with ``-reload`` it reads and
runs them while it fuzzes; their mtimes are stepped so that its whole-second "newer than my last
read" test cannot skip them), lets the process run (SIGCONT) for ``slice_s`` seconds of wall
time (start-up included; the first turn lasts until the first execution unless the worker ends
it for a waiting task, and a process still importing at the end of a turn goes on at the next),
then stops it (SIGSTOP: the core is the engine's until the next turn) and answers with what the process did
meanwhile: every input libFuzzer kept (OK), every crash and hang (CRASH / HANG with their
traceback) and its executions. An aborted turn only stops the process: what it found is in the
next turn's answer. New dictionary tokens go into the dictionary file, which libFuzzer reads at
start only: a turn restarts the process (same corpus) once 8 new tokens have come and its
start-up was under 2% of its run so far.

A Python exception or CPU time-out is caught inside the process (it goes on). What Python cannot
catch ends it: a native crash or out of memory (libFuzzer writes its artifact), or a native hang,
seen here by the shared execution counter standing still (for ``2 x exec_timeout_s + 1`` seconds
of the child's CPU, or ``4 x exec_timeout_s + 2`` seconds of running wall time for a hang that
burns no CPU): the executor sends SIGSEGV, so libFuzzer writes the input it was running. The
input is reported once, leaves the corpus folder, and the process starts again on the same corpus
(nothing else lost; the same stack again is not reported again), within the turn while it lasts
(at most 50 restarts a turn). Traces are filled in by ``TracedExecutor`` (the real tracer), not here.

A turn answers before ``slice_s`` (but after at least 1 s) when its process finds a crash or hang
of a new signature (a Python one grows ``found/signatures.list``; a native one ends the process),
so the campaign can confirm it at once, and when the worker ends it (``end_turn``: a
confirmation waits here).

Options (``Task.options``): ``slice_s``, ``exec_timeout_s``, ``max_len``, ``max_candidates``,
``rss_limit_mb``, ``library_dict`` (the process adds the constants of the code under test to the
dictionary: worker/fuzz/libdict.py).
"""

from __future__ import annotations

import hashlib
import math
import mmap
import os
import re
import signal
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from symfence.protocol.fuzzslice import unpack_spec
from symfence.protocol.options import FuzzOptions
from symfence.worker import childwire as wire
from symfence.worker.childproc import ChildProcess, describe_exit
from symfence.worker.engine_api import CandidateOut, Executor, ExitKind, Outcome, Task
from symfence.worker.fuzz.libdict import dict_line
from symfence.worker.fuzz import DROP_LIST, HOOK_FAILED, SHARED_BYTES

log = structlog.get_logger()
_ENGINE = "symfence.worker.fuzz.live_child"
_MAX_RESTARTS = 50  # per turn
_CUT_AFTER_S = 1.0  # a turn cut short (a new find, end_turn) still runs this long: at most a turn a second
_START_LIMIT_S = 600.0  # import + instrumentation + corpus load: past this with no input run, an error
_ARTIFACT_KINDS = {"crash": ExitKind.CRASH, "oom": ExitKind.CRASH, "leak": ExitKind.CRASH,
                   "timeout": ExitKind.HANG}
_MAX_RESULT_BYTES = 4 << 20  # kept inputs per RESULT (the rest go in the next turn's)
_DICT_RESTART_TOKENS = 8  # new dictionary tokens worth a restart ...
# ... when its start-up is at most this share of the run's time so far (what a restart really
# costs is more: the target's lazily built state goes too, e.g. pygments' compiled lexers: the turn
# after a restart ran a third of the executions of the turn before it, measured)
_DICT_RESTART_COST = 0.02
_CLK_TCK = os.sysconf("SC_CLK_TCK")
# libFuzzer's (and Atheris's own) unit timer counts wall time, stopped time included: after a
# turn's SIGSTOP it would call any unit a time-out. "Off" is a day (-timeout=0 is not off: Atheris
# reads it as a 0 s limit); native hangs are the watchdog's (_watchdog).
_UNIT_TIMER_OFF_S = 86400


_LIBRARY_DICT = re.compile(rb"symfence: (\d+) dictionary tokens from the code under test")  # live_child.py
_HOOK = re.compile(rb"symfence: the harness's (custom_mutator|custom_crossover) (\S+)( is not)?")  # live_child.py
_LOG_HEAD = 8 << 20  # the start of a run's log read for it (its instrumentation lines come first)
_OOM_AMOUNT = re.compile(r"(?<=out-of-memory )\([^\n]*?\)")  # "(used: 3070Mb; exceeds: 2048Mb)"
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


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


@dataclass
class _Live:
    """One target's long-lived fuzzing process and its folders; lives as long as the executor."""

    folder: Path
    tokens: list[bytes] = field(default_factory=list)
    token_set: set[bytes] = field(default_factory=set)
    known: set[str] = field(default_factory=set)  # corpus file names imported or already reported
    proc: ChildProcess | None = None
    counter: memoryview | None = None
    counter_map: mmap.mmap | None = None
    launched_at: float = 0.0
    entered_at: float | None = None  # this run's first execution (monotonic)
    log_offset: int = 0  # where this run's part of the log starts
    reported: int = 0  # the counter's value at the last answer (this run)
    progress_count: int = 0  # watchdog: the counter when it last moved ...
    progress_at: float = 0.0  # ... and when (wall, running time only)
    progress_cpu: float = 0.0  # ... and the child's CPU then
    hang_signalled: bool = False  # the watchdog sent SIGSEGV for a native hang
    parent_killed: bool = False  # this parent ended the process (not started in time, a bad message)
    stamp_ns: int = 0  # the last mtime given to imported entries (and the corpus folder)
    native_seen: set[str] = field(default_factory=set)  # what ended the process, once per stack
    startup_s: float = 0.0  # this run's start-up: launch to first execution
    launch_tokens: int = 0  # dictionary tokens this run was started with
    runs: int = 0
    cpu_answered: float = 0.0  # the child's CPU at the last answer (it may run on until paused)
    signatures_size: int = 0  # found/signatures.list's size when last looked: it grows by a new find

    @property
    def corpus(self) -> Path:
        return self.folder / "corpus"

    @property
    def found(self) -> Path:
        return self.folder / "found"

    @property
    def artifacts(self) -> Path:
        return self.folder / "artifacts"

    @property
    def dictionary(self) -> Path:
        return self.folder / "dictionary"

    @property
    def log(self) -> Path:
        return self.folder / "log"

    def count(self) -> int:
        return int(self.counter[0]) if self.counter is not None else 0


@dataclass
class _Turn:
    task: Task
    options: FuzzOptions
    live: _Live
    started: float
    execs: int = 0
    cpu_s: float = 0.0
    cpu_mark: float = 0.0  # the child's CPU when this turn resumed it (or it started)
    startup_s: float = 0.0
    runs: int = 0
    restarts: int = 0
    artifacts: list[CandidateOut] = field(default_factory=list)
    error: str = ""
    cut: bool = False  # a new find or end_turn: answer after _CUT_AFTER_S, before slice_s

    @property
    def ends_at(self) -> float:
        return self.started + (min(self.options.slice_s, _CUT_AFTER_S) if self.cut else self.options.slice_s)


class FuzzExecutor:
    """Executor for turns of long-lived Atheris processes; see the module docstring."""

    def __init__(self, *, python: str | None = None, workdir: str | None = None):
        self._python = python or sys.executable
        self._root = Path(tempfile.mkdtemp(prefix="symfence-fuzz-", dir=workdir))
        self._lives: dict[str, _Live] = {}
        self._turn: _Turn | None = None
        self._last: _Live | None = None
        self._ready: Outcome | None = None

    @property
    def child_pid(self) -> int | None:
        """The process of the last turn (running, or stopped between turns)."""
        live = self._last
        return live.proc.pid if live is not None and live.proc is not None else None

    # -- Executor protocol --------------------------------------------------------------------

    def start(self, task: Task) -> None:
        self._ready = None
        try:
            options = FuzzOptions.from_mapping(task.options)
            spec = unpack_spec(task.data)
        except ValueError as exc:
            self._ready = Outcome(ExitKind.ERROR, error=f"bad fuzz slice: {exc}")
            return
        self.pause()  # the last turn's process, still running on after its answer
        live = self._last = self._live(task.target)
        self._pause(live)
        self._add_tokens(live, spec.tokens)
        self._import(live, spec.entries)
        turn = self._turn = _Turn(task, options, live, time.monotonic())
        if live.proc is not None and self._dictionary_due(live, turn.started):
            log.info("fuzz.restarted", target=task.target, reason="dictionary", tokens=len(live.tokens))
            turn.execs += live.count() - live.reported  # what it ran after its last answer
            self._end(live)  # the inputs it kept meanwhile are in the corpus folder: the next answer's
        if live.proc is None:
            self._launch(turn)
        else:
            self._resume(turn)

    def wait(self, timeout_s: float) -> Outcome | None:
        if self._ready is not None:
            outcome, self._ready = self._ready, None
            return outcome
        turn = self._turn
        if turn is None:
            return None
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            live = turn.live
            assert live.proc is not None
            ended = live.proc.exited() is not None
            self._drain(turn)  # after the exit check: what it sent before exiting is all there
            if ended:
                answer = self._process_ended(turn)
                if answer is not None:
                    return answer
                continue
            now = time.monotonic()
            if not turn.cut and self._found_new(live):
                turn.cut = True  # a new crash or hang: answered now, confirmed while the process goes on
            if live.entered_at is not None:
                self._watchdog(turn, now)
            elif now - live.launched_at > _START_LIMIT_S:
                live.parent_killed = True
                live.proc.kill_group()  # ends as a process that never ran an input
                continue
            # A first start answers once it runs an input (its answer says if it runs), unless the
            # worker ends the turn for a task waiting behind it: a harness whose process takes 20 s
            # to import and instrument (soupsieve with instrument_all()) left the engine idle
            # that long on both workers. It goes on importing at the next turn.
            first_start = live.entered_at is None and live.runs == 1 and not turn.cut
            if now >= turn.ends_at and not first_start:
                return self._answer(turn)  # (a restart still starting goes on at the next turn)
            if now >= deadline:
                return None
            time.sleep(min(0.01, max(0.0, deadline - now)))

    def end_turn(self) -> bool:
        """The turn answers soon with what it did so far (engine_api.Turns): once it has run
        `_CUT_AFTER_S`, a process on its first start too (it goes on importing at the next
        turn). The process stops between turns as after any answer, so nothing it found is lost."""
        turn = self._turn
        if turn is None or self._ready is not None:
            return False
        turn.cut = True
        return True

    @staticmethod
    def _found_new(live: _Live) -> bool:
        """Whether the process recorded a crash or hang of a new signature since the last look."""
        try:
            size = os.stat(live.found / "signatures.list").st_size
        except OSError:
            return False
        grew, live.signatures_size = size > live.signatures_size, size
        return grew

    def abort(self) -> None:
        """The turn is cancelled: the process is only stopped, its finds go in the next answer."""
        turn, self._turn = self._turn, None
        self._ready = None
        if turn is not None and turn.live.proc is not None:
            self._pause(turn.live)
        self.pause()

    def pause(self) -> None:
        """Stop the process of the last turn, which runs on after its answer (while the real
        tracer measures the inputs it kept, the core has room for it): before anything else runs
        on this worker (the wrapper below calls this once the tracing is done)."""
        if self._turn is None and self._last is not None:
            self._pause(self._last)

    def close(self) -> None:
        self._turn = None
        for live in self._lives.values():
            self._end(live)
        shutil.rmtree(self._root, ignore_errors=True)

    # -- the process's life -------------------------------------------------------------------

    def _live(self, target: str) -> _Live:
        live = self._lives.get(target)
        if live is None:
            live = _Live(self._root / hashlib.sha256(target.encode()).hexdigest()[:16])
            for folder in (live.corpus, live.found, live.artifacts):
                folder.mkdir(parents=True)
            live.log.touch()
            self._lives[target] = live
        return live

    def _add_tokens(self, live: _Live, tokens: tuple[bytes, ...]) -> None:
        new_tokens = [t for t in tokens if t not in live.token_set]
        if new_tokens:
            with live.dictionary.open("a") as fh:
                for i, token in enumerate(new_tokens, len(live.tokens)):
                    fh.write(dict_line(i, token))
            live.tokens.extend(new_tokens)
            live.token_set.update(new_tokens)

    def _import(self, live: _Live, entries: tuple[bytes, ...]) -> None:
        """Drop entries into the corpus folder. libFuzzer's reload reads the folder only when its
        mtime (whole seconds) is past the one it last read, and then the files not older than
        that: every import gets a stamp past all earlier ones, on its files and on the folder.
        The process is stopped (or not started) meanwhile, so it never sees half an import."""
        fresh = []
        for entry in entries:
            name = hashlib.sha1(entry).hexdigest()
            if name not in live.known:
                live.known.add(name)
                if not (live.corpus / name).exists():
                    fresh.append((name, entry))
        if not fresh:
            return
        whole_s = 1_000_000_000
        live.stamp_ns = max((math.ceil(time.time()) + 1) * whole_s, live.stamp_ns + whole_s)
        stamp = (live.stamp_ns, live.stamp_ns)
        for name, entry in fresh:
            tmp = live.folder / "incoming.tmp"
            tmp.write_bytes(entry)
            os.utime(tmp, ns=stamp)
            os.replace(tmp, live.corpus / name)
        os.utime(live.corpus, ns=stamp)

    def _launch(self, turn: _Turn) -> None:
        live, opts = turn.live, turn.options
        args = [str(live.corpus), f"-timeout={_UNIT_TIMER_OFF_S}", "-reload=1", f"-artifact_prefix={live.artifacts}{os.sep}"]
        if opts.max_len:
            args.append(f"-max_len={opts.max_len}")
        if live.tokens:
            args.append(f"-dict={live.dictionary}")
        counter_path = live.folder / f"counter-{live.runs}"
        counter_path.write_bytes(bytes(SHARED_BYTES))
        options = {"libfuzzer_args": args, "found_dir": str(live.found), "counter_path": str(counter_path),
                   "exec_timeout_s": opts.exec_timeout_s, "library_dict": opts.library_dict,
                   "rss_limit_mb": opts.rss_limit_mb}  # the child enforces it (worker/memory_limit.py)
        self._unmap(live)
        with counter_path.open("r+b") as fh:
            live.counter_map = mmap.mmap(fh.fileno(), SHARED_BYTES)
        live.counter = memoryview(live.counter_map).cast("Q")
        live.log_offset = live.log.stat().st_size
        live.proc = ChildProcess(_ENGINE, python=self._python, stderr=str(live.log), fatal_file=False)
        live.launched_at = time.monotonic()
        live.entered_at, live.reported, live.hang_signalled, live.parent_killed = None, 0, False, False
        self._mark_progress(live, live.launched_at)
        live.runs += 1
        live.launch_tokens = len(live.tokens)
        turn.runs += 1
        log.info("fuzz.started", target=turn.task.target, pid=live.proc.pid, run=live.runs,
                 corpus=sum(1 for _ in os.scandir(live.corpus)))
        turn.cpu_mark = live.cpu_answered = 0.0
        try:
            live.proc.send(wire.RunTask(Task(turn.task.token, turn.task.work_id, b"", turn.task.target,
                                             options=options), tuple(sys.path)))
        except OSError:
            pass  # it died at once: the exit check sees it

    @staticmethod
    def _dictionary_due(live: _Live, now: float) -> bool:
        """libFuzzer reads -dict at start only: a restart for new tokens when there are enough of
        them and the restart is cheap (start-up under 5% of the time this run has had)."""
        new = len(live.tokens) - live.launch_tokens
        return new >= _DICT_RESTART_TOKENS and live.entered_at is not None \
            and live.startup_s <= _DICT_RESTART_COST * (now - live.launched_at)

    def _resume(self, turn: _Turn) -> None:
        live = turn.live
        assert live.proc is not None
        turn.cpu_mark = live.cpu_answered  # CPU it used after the last answer counts in this turn
        self._mark_progress(live, time.monotonic())
        self._signal(live, signal.SIGCONT)

    def _pause(self, live: _Live) -> None:
        self._signal(live, signal.SIGSTOP)

    @staticmethod
    def _signal(live: _Live, sig: int) -> None:
        if live.proc is not None and live.proc.returncode is None:
            try:
                os.killpg(live.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _end(self, live: _Live) -> None:
        if live.proc is not None:
            live.proc.close()
            live.proc = None
        self._unmap(live)

    @staticmethod
    def _unmap(live: _Live) -> None:
        if live.counter is not None:
            live.counter.release()
            live.counter = None
        if live.counter_map is not None:
            live.counter_map.close()
            live.counter_map = None

    def _mark_progress(self, live: _Live, now: float) -> None:
        live.progress_count, live.progress_at = live.count(), now
        live.progress_cpu = _cpu_s(live.proc.pid) if live.proc is not None else 0.0

    def _watchdog(self, turn: _Turn, now: float) -> None:
        """A native hang: the counter stands still while the child burns CPU (or the clock runs)."""
        live, timeout = turn.live, turn.options.exec_timeout_s
        if live.hang_signalled or live.count() != live.progress_count:
            if live.count() != live.progress_count:
                live.progress_count, live.progress_at = live.count(), now
                live.progress_cpu = -1.0  # read lazily: /proc only once it stands still
            return
        if now - live.progress_at < timeout:
            return
        assert live.proc is not None
        cpu = _cpu_s(live.proc.pid)
        if live.progress_cpu < 0:
            live.progress_cpu = cpu
        if cpu - live.progress_cpu > 2 * timeout + 1 or now - live.progress_at > 4 * timeout + 2:
            live.hang_signalled = True
            self._signal(live, signal.SIGSEGV)  # libFuzzer's handler writes the running input

    @staticmethod
    def _announce_start(target: str, live: _Live) -> None:
        """At each process start, one `fuzz.library_dict` event: how many tokens the process read
        from the code under test (worker/fuzz/libdict.py; its stderr line) beside the campaign's;
        and `fuzz.custom_hooks` when the harness hands Atheris its own mutator or crossover
        (which the process runs with, or could not find)."""
        try:
            with live.log.open("rb") as fh:
                fh.seek(live.log_offset)
                head = fh.read(_LOG_HEAD)
        except OSError:
            return
        found = _LIBRARY_DICT.search(head)
        log.info("fuzz.library_dict", target=target, run=live.runs, tokens=int(found.group(1)) if found else 0,
                 campaign_tokens=live.launch_tokens)
        hooks: dict[str, str] = {}
        missing: list[str] = []
        for m in _HOOK.finditer(head):
            name = m.group(2).decode(errors="replace")
            if m.group(3):
                missing.append(name)
            else:
                hooks[m.group(1).decode()] = name
        if hooks or missing:
            (log.warning if missing else log.info)("fuzz.custom_hooks", target=target, run=live.runs, hooks=hooks,
                                                   missing=missing)

    @staticmethod
    def _announce_hook_failure(target: str, live: _Live) -> None:
        """The harness's custom mutator or crossover raised (or returned no bytes) in this process:
        libFuzzer's own mutation stood in (live_child.py); the first failure's traceback, once."""
        path = live.found / HOOK_FAILED
        try:
            text = path.read_text(errors="replace")
            path.unlink()
        except OSError:
            return
        log.warning("fuzz.custom_hook_failed", target=target, run=live.runs, detail=text.strip()[-2000:],
                    note="libFuzzer's own mutation stands in whenever the harness's hook fails")

    def _drain(self, turn: _Turn) -> None:
        """Take in what the child streamed: its first execution, or why it failed."""
        live = turn.live
        proc = live.proc
        assert proc is not None
        try:
            while proc.poll(0):
                message = proc.recv()
                if isinstance(message, wire.Entered) and live.entered_at is None:
                    live.entered_at = message.since
                    live.startup_s = max(0.0, message.since - live.launched_at)
                    turn.startup_s += live.startup_s
                    self._announce_start(turn.task.target, live)
                elif isinstance(message, wire.Done):  # the harness failed before fuzzing
                    with live.log.open("a") as log:
                        log.write(message.outcome.error)
                    live.parent_killed = True
                    proc.kill_group()
        except (EOFError, OSError):
            return  # it ended: the exit check sees it
        except wire.ChildProtocolError as exc:
            with live.log.open("a") as log:
                log.write(f"fuzz child sent a malformed message: {exc}\n")
            live.parent_killed = True
            proc.kill_group()

    def _process_ended(self, turn: _Turn) -> Outcome | None:
        """The process ended (something Python cannot catch): report its artifact once, drop the
        input from the corpus, start again on the same corpus while the turn lasts."""
        live = turn.live
        assert live.proc is not None
        turn.execs += live.count() - live.reported
        live.reported = live.count()
        turn.cpu_s += max(0.0, live.proc.cpu_s - turn.cpu_mark)
        with live.log.open("rb") as fh:
            fh.seek(live.log_offset)
            run_log = fh.read().decode(errors="replace")
        ran = live.entered_at is not None
        hang = live.hang_signalled
        running, how = self._running_input(live), describe_exit(live.proc.returncode or 0)
        self._end(live)
        reported = False
        for path in sorted(live.artifacts.iterdir()):
            prefix = path.name.split("-", 1)[0]
            kind = _ARTIFACT_KINDS.get(prefix)
            if kind is None:
                path.unlink()
                continue
            detail = native_detail(prefix, run_log)
            if hang and prefix == "crash":  # our SIGSEGV: the watchdog's native hang
                kind = ExitKind.HANG
                detail = native_detail("timeout", run_log).replace(
                    "libFuzzer: deadly signal", "no execution finished in time (native code or a blocking call)")
            data = path.read_bytes()
            path.unlink()
            reported = True
            self._killer(turn, data, kind, detail)
        if not reported and not hang and not live.parent_killed and running is not None:  # silently, in the target
            self._killer(turn, running, ExitKind.CRASH,
                         f"Traceback (most recent call last):\nProcessEnded: the fuzz process {how} inside the "
                         "target without a report (native code's exit, or the kernel's out-of-memory killer)\n")
        self._drop_listed(live)  # before the restart loads the corpus again
        if not ran:  # import error, bad target, ...: a restart would fail the same way
            turn.error = "fuzz process ran no input:\n" + run_log[-4000:]
            return self._answer(turn)
        if turn.restarts >= _MAX_RESTARTS or time.monotonic() >= turn.ends_at:
            return self._answer(turn)  # the next turn starts it again
        turn.restarts += 1
        self._launch(turn)
        return None

    @staticmethod
    def _drop_listed(live: _Live) -> None:
        """Take the inputs the process listed in DROP_LIST out of its corpus folder."""
        listed = live.found / DROP_LIST
        if listed.exists():
            for sha1 in listed.read_text().split():
                live.known.add(sha1)
                (live.corpus / sha1).unlink(missing_ok=True)
            listed.unlink()

    @staticmethod
    def _killer(turn: _Turn, data: bytes, kind: ExitKind, detail: str) -> None:
        """An input that ended the process: a finding once per stack (detail), and out of the corpus."""
        live = turn.live
        stack = _OOM_AMOUNT.sub("(...)", detail)  # how much memory differs from one input to the next
        if stack not in live.native_seen:  # the same stack again: its input only leaves the corpus
            live.native_seen.add(stack)
            turn.artifacts.append(CandidateOut(data, {}, kind, 0, detail))
            turn.cut = True  # a new stack: answered now (the next turn starts the process again)
        # A corpus file that kills the process would kill every restart while loading the corpus:
        # it leaves the fuzzer's corpus (it is reported as a finding instead).
        (live.corpus / hashlib.sha1(data).hexdigest()).unlink(missing_ok=True)

    @staticmethod
    def _running_input(live: _Live) -> bytes | None:
        """The input the process was running when it ended (the shared file), or None."""
        if live.counter is None or live.counter_map is None or not live.counter[1]:
            return None
        return bytes(live.counter_map[16:16 + live.counter[1] - 1])

    # -- the answer ---------------------------------------------------------------------------

    def _answer(self, turn: _Turn) -> Outcome:
        """Stop the process and report what it did since the last answer."""
        self._turn = None
        live, opts = turn.live, turn.options
        if live.proc is not None:
            self._pause(live)  # while its corpus folder is read (libFuzzer's writes are not atomic)
            turn.execs += live.count() - live.reported
            live.reported = live.count()
            live.cpu_answered = _cpu_s(live.proc.pid)
            turn.cpu_s += max(0.0, live.cpu_answered - turn.cpu_mark)
        self._drop_listed(live)
        candidates: list[CandidateOut] = []
        size = kept = 0
        fresh = [e for e in os.scandir(live.corpus) if e.name not in live.known]
        for entry in sorted(fresh, key=lambda e: e.stat().st_mtime_ns):
            try:
                data = Path(entry.path).read_bytes()
            except OSError:
                continue
            if len(candidates) >= opts.max_candidates or size + len(data) > _MAX_RESULT_BYTES:
                break  # the next answer
            live.known.add(entry.name)
            candidates.append(CandidateOut(data, {}, ExitKind.OK, 0))
            size += len(data)
            kept += 1
        found = 0
        for path in sorted(live.found.iterdir()):
            if path.suffix in (".txt", ".list", ".tmp"):
                continue
            kind = ExitKind.CRASH if path.name.startswith("crash-") else ExitKind.HANG
            detail_path = path.with_name(path.name + ".txt")
            detail = detail_path.read_text(errors="replace") if detail_path.exists() else ""
            candidates.append(CandidateOut(path.read_bytes(), {}, kind, 0, detail))
            path.unlink()
            detail_path.unlink(missing_ok=True)
            found += 1
        candidates.extend(turn.artifacts)
        self._announce_hook_failure(turn.task.target, live)
        log.info("fuzz.turn", target=turn.task.target, wall_s=round(time.monotonic() - turn.started, 3),
                 cpu_s=round(turn.cpu_s, 3), execs=turn.execs, startup_s=round(turn.startup_s, 3), kept=kept,
                 findings=found + len(turn.artifacts), restarts=turn.restarts)
        status = ExitKind.ERROR if turn.error and turn.execs == 0 and not candidates else ExitKind.OK
        if live.proc is not None and kept:
            self._signal(live, signal.SIGCONT)  # runs on while they are traced; pause() stops it
        stats = {"fuzz_turns": 1, "fuzz_runs": turn.runs, "fuzz_restarts": turn.restarts,
                 "fuzz_kept": kept, "fuzz_findings": found + len(turn.artifacts),
                 "fuzz_startup_ms": int(turn.startup_s * 1000),
                 "fuzz_corpus": sum(1 for _ in os.scandir(live.corpus))}
        return Outcome(status, {}, tuple(candidates), wall_s=time.monotonic() - turn.started,
                       cpu_s=turn.cpu_s, execs=turn.execs, error=turn.error if status is ExitKind.ERROR else "",
                       stats=stats)


def executor() -> Executor:
    """The WORK executor "fuzz": turns of long-lived Atheris processes, their inputs measured by
    the real tracer while the process runs on."""
    from symfence.worker.executors.traced import TracedExecutor

    class TracedTurns(TracedExecutor):
        """Stops the fuzzing process once the inputs of its turn are traced (or the turn ends
        otherwise): it runs on during the tracing, a process of its own beside the tracer."""

        inner: FuzzExecutor

        def wait(self, timeout_s: float) -> Outcome | None:
            outcome = super().wait(timeout_s)
            if outcome is not None:
                self.inner.pause()
            return outcome

        def abort(self) -> None:
            super().abort()
            self.inner.pause()

    return TracedTurns(FuzzExecutor(), trace_input=False)
