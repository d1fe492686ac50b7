"""The long-lived Atheris (libFuzzer) process of one target on one worker (a ``childserve`` handler).

Run as ``python -m symfence.worker.childserve symfence.worker.fuzz.live_child ...`` by
``worker.executors.fuzz.FuzzExecutor``, once per target for the whole campaign (again only after
something Python cannot catch ended it). The request's task names the target; its options carry
``libfuzzer_args``, ``found_dir``, ``counter_path``, ``exec_timeout_s`` and ``rss_limit_mb``. The target's module is
imported inside ``atheris.instrument_imports`` (the target and the library code it imports count
for libFuzzer's coverage feedback; what was imported before it, by Python, Atheris or this process,
is instrumented in place: ``inplace.py``), then ``atheris.Fuzz`` runs with no time limit: the parent
ends it. While it runs, a module of the harness's packages imported for the first time (a plugin
found on first use) is instrumented too. libFuzzer's first corpus folder is the target's corpus
folder: it writes the inputs it keeps there, and with ``-reload`` it reads (and runs) every file
the parent drops there while it runs - how the engine's and other workers' finds reach it.

A Python exception or CPU time-out inside the target does not end the run: the harness catches
it, records the input once per distinct signature (``found/crash-<sha1>`` plus a ``.txt`` with the
traceback, or ``found/hang-<sha1>``) and returns, so libFuzzer keeps going. Every execution
stores the execution count in a file the parent maps too (``counter_path``: its progress and its
native-hang watchdog), beside the input the target is running (``worker.fuzz.SHARED_BYTES``: the
parent's record of an input that ends the process without libFuzzer's report). libFuzzer's and Atheris's wall-clock unit timer is
set to a day (``-timeout=86400``): the parent stops the process (SIGSTOP) while the engine has the core, which
that timer would take for a hang. ``faulthandler`` is on, so a native crash (or the parent's
SIGSEGV for a native hang) leaves the Python stack in the log. The process asks the kernel to
kill it when the worker dies (``PR_SET_PDEATHSIG``): it has no time limit of its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import hashlib
import importlib
import mmap
import os
import signal
import sys
import traceback
from typing import Any, Callable

import atheris

from symfence.protocol.entrypoint import setup_hooks
from symfence.protocol.pycrash import compact_traceback, first_repeating
from symfence.worker import atheris_compat, memory_limit, target_exit
from symfence.worker.childserve import Events
from symfence.worker.childwire import RunTask
from symfence.worker.concolic.harness_imports import harness_imports
from symfence.worker.engine_api import Outcome, Phase
from symfence.worker.fuzz import DROP_LIST, HOOK_FAILED, LAST_INPUT_MAX, SHARED_BYTES, inplace, libdict

_MAX_FINDINGS = 1024  # per target: one input per distinct signature (type and raising line), at most
# this many (a bound for code generated at run time; 64 could cut off a large library's bugs: the
# coordinator dedupes by identity, this only keeps one process from sending the same one twice)
_PR_SET_PDEATHSIG = 1
# Once this process has hung on an input (its hang is recorded once per target and worker, in
# `signatures.list`), another input that runs long brings nothing (it would not be recorded) and
# costs the whole time-out: an input one mutation from a corpus entry can hang on every tenth
# execution (a loop behind a compared byte, which Atheris's comparison hints propose). So from then
# on an execution is cut at _CUT_TIMES x the slowest one that completed, at least _CUT_FLOOR_S, at
# most the time-out, as AFL++ fuzzes with a time-out calibrated on the target's speed.
_CUT_TIMES, _CUT_FLOOR_S = 10.0, 0.02
# An execution cut short in a function where this process has recorded no hang yet is run again
# with the whole time-out, once per function (at most _MAX_HANG_RERUNS per process): a second
# loop elsewhere is still found, and a slow but finite input costs one re-run.
_MAX_HANG_RERUNS = 32
# An execution the CPU timer interrupted in an import, or that imported modules, runs again with
# this much CPU (once per place): the imports a library makes on first use, instrumented as they
# load, are not the input's time.
_IMPORT_ALLOWANCE_S, _MAX_IMPORT_RERUNS = 30.0, 8
# Atheris's own Setup and Fuzz, for this process to call: a harness's calls are no-ops (`fuzz`).
_SETUP, _FUZZ = atheris.Setup, atheris.Fuzz


class _Timeout(BaseException):
    pass


_armed = [False]  # inside the target's call: only there may the CPU timer interrupt


def _on_vtalrm(signum: int, frame: Any) -> None:
    # A timer signal whose Python handler runs late (after the call returned, or a repeat while
    # the last one is handled) must not escape one_input: Atheris ends the process on that.
    if _armed[0]:
        _armed[0] = False
        raise _Timeout()


def _hang_site(exc: BaseException) -> str:
    """Where the CPU timer interrupted the target: the innermost frame's file and function that is
    not this module's (the timer's handler raises, inside the target)."""
    site, tb = "?", exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename != __file__:
            site = f"{code.co_filename}:{code.co_name}"
        tb = tb.tb_next
    return site


_ATHERIS_DIR = os.path.dirname(atheris.__file__) + os.sep


def _in_import(exc: BaseException) -> bool:
    """Whether the CPU timer interrupted an import: the body of a module that the interruption left
    unimported, or Atheris's loader instrumenting one (not code run by ``exec`` in a module that is
    there; the import system strips its own frames from tracebacks)."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename.startswith((_ATHERIS_DIR, "<frozen importlib")):
            return True
        if frame.f_code.co_name == "<module>":  # a module body: one whose import failed has left sys.modules
            module = sys.modules.get(frame.f_globals.get("__name__", ""))
            if module is None or getattr(module, "__dict__", None) is not frame.f_globals:
                return True
        tb = tb.tb_next
    return False


def _signature(exc: BaseException) -> str:
    """Type and raising line; a RecursionError's raising line is wherever the limit hit, so its is
    the first of the functions that repeat (the coordinator names the bug by the same rule)."""
    tb = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != target_exit.__file__]
    if isinstance(exc, RecursionError):
        named = first_repeating(f"{frame.filename}:{frame.name}" for frame in tb)
        if named is not None:
            return f"RecursionError@{named}"
    where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else "?"
    return f"{type(exc).__name__}@{where}"


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's close() still kills the group
        pass
    if os.getppid() == 1:  # the parent died before the request arrived
        target_exit.real_exit(1)


def _with_library_dict(args: list[str], harness: str, wanted: Callable[[str], bool], path: str) -> list[str]:
    """libFuzzer's arguments with `-dict` naming a file of the campaign's dictionary (the `-dict`
    given, if any) followed by the library's constants; unchanged when it has none, or when
    they cannot be read or written (one stderr line: the process fuzzes without them)."""
    given = [a for a in args if a.startswith("-dict=")]
    try:
        tokens = libdict.library_tokens(libdict.modules_of(harness, wanted))
        if not tokens:
            return args
        libdict.write_dictionary(path, tokens, first=given[-1][len("-dict="):] if given else None)
    except Exception as exc:  # noqa: BLE001 - a missing dictionary must not stop the fuzz stage
        print(f"symfence: no dictionary from the code under test: {type(exc).__name__}: {exc}", file=sys.stderr,
              flush=True)
        return args
    print(f"symfence: {len(tokens)} dictionary tokens from the code under test", file=sys.stderr, flush=True)
    return [a for a in args if not a.startswith("-dict=")] + [f"-dict={path}"]


def _guarded(keyword: str, hook: Callable[..., Any], found: str) -> Callable[..., bytes]:
    """The harness's hook, except that an exception or a non-bytes answer gives libFuzzer's own
    mutation of the input instead (Atheris would end the process, and the fuzz stage would restart
    it for ever); the first failure of each process is written to ``found/HOOK_FAILED``."""
    told: list[bool] = []
    limit = 1 if keyword == "custom_mutator" else 2  # (data, max_size, seed) / (data1, data2, max_out_size, seed)

    def fallback(args: tuple[Any, ...]) -> bytes:
        if keyword == "custom_mutator":
            return bytes(atheris.Mutate(args[0], args[1]))
        return bytes(args[0][:args[limit]])  # crossover: the first parent

    def call(*args: Any) -> bytes:
        try:
            out = hook(*args)
            if isinstance(out, (bytes, bytearray)):
                return bytes(out[:args[limit]])  # at most what libFuzzer asked for
            problem = f"returned {type(out).__name__}, not bytes"
        except Exception as exc:  # noqa: BLE001 - the harness's bug, not the campaign's end
            problem = "".join(traceback.format_exception(exc.with_traceback(exc.__traceback__.tb_next
                                                                            if exc.__traceback__ else None)))
        if not told:
            told.append(True)
            with open(os.path.join(found, HOOK_FAILED), "a") as fh:
                fh.write(f"{keyword}: {problem.strip()}\n")
        return fallback(args)

    return call


def harness_hooks(module: Any) -> list[tuple[str, str, Callable[..., Any] | None]]:
    """``(keyword, name as written, function or None)`` for each ``custom_mutator``/
    ``custom_crossover`` the harness's Setup call names (protocol/entrypoint.py), looked up in the
    imported module. Also what the benchmarks' Atheris side hands Atheris (bench/atheris_driver.py)."""
    try:
        with open(module.__file__, "rb") as fh:
            source = fh.read()
    except (OSError, TypeError, AttributeError):
        return []
    hooks: list[tuple[str, str, Callable[..., Any] | None]] = []
    for keyword, dotted in setup_hooks(source).items():
        obj: Any = module
        for part in dotted.split("."):
            obj = getattr(obj, part, None)
        hooks.append((keyword, dotted, obj if callable(obj) else None))
    return hooks


def _hooks(module: Any, found_dir: str) -> dict[str, Callable[..., bytes]]:
    """The harness's hooks as Atheris runs them, guarded (`_guarded`); one stderr line each,
    found or not (the worker logs them)."""
    guarded: dict[str, Callable[..., bytes]] = {}
    for keyword, dotted, hook in harness_hooks(module):
        if hook is None:
            print(f"symfence: the harness's {keyword} {dotted} is not a function of its module once imported: "
                  "libFuzzer's own mutation instead", file=sys.stderr, flush=True)
            continue
        guarded[keyword] = _guarded(keyword, hook, found_dir)
        print(f"symfence: the harness's {keyword} {dotted}", file=sys.stderr, flush=True)
    return guarded


def fuzz(request: RunTask, events: Events) -> Outcome:
    _die_with_parent()
    spec = request.task.options
    module_name, _, attr = request.task.target.partition(":")
    atheris_compat.plain(atheris_compat.IN_FUZZ_SLICE)
    asked_all: list[bool] = []
    atheris.instrument_all = lambda: asked_all.append(True)  # the harness's call: done below
    before = set(sys.modules)
    # Everything the target's import brings in is instrumented, symfence and Atheris excepted ...
    with atheris.instrument_imports(exclude=list(inplace.NEVER)):
        module = importlib.import_module(module_name)
    fn = getattr(module, attr)
    hooks = _hooks(module, spec["found_dir"])
    # ... and what was imported before it (inplace.py): the harness's packages, or everything
    # but symfence and Atheris if the harness called instrument_all().
    under_test = list(harness_imports(module_name))  # never symfence nor atheris
    if asked_all or under_test:
        patched, failed = inplace.instrument_loaded(inplace.outside() if asked_all else inplace.in_packages(under_test))
        if failed:
            print(f"symfence: {failed} functions could not be instrumented ({patched} were)", file=sys.stderr)
    found = spec["found_dir"]
    # While it fuzzes, the target's own output (fd 1 and 2: prints, `logging`'s warnings, a C
    # library's messages) goes nowhere: libFuzzer's -close_fd_mask=3 keeps its own reports on a
    # copy of stderr, the log, and so does this process (`log`). A harness that logs a line per
    # input wrote 2.5 MB/s into the log, which nothing bounded.
    log = os.fdopen(os.dup(2), "w", buffering=1)
    args = [sys.argv[0], *spec["libfuzzer_args"], "-close_fd_mask=3"]
    if spec.get("library_dict", True):  # the constants of the code under test as -dict (libdict.py)
        wanted = inplace.in_packages(under_test) if under_test else (lambda name: name not in before)
        args = _with_library_dict(args, module_name, wanted, os.path.join(os.path.dirname(found), "library.dict"))
    exec_timeout = float(spec["exec_timeout_s"])
    signatures = os.path.join(found, "signatures.list")  # shared by the restarts of the process
    seen: set[str] = set(open(signatures).read().splitlines()) if os.path.exists(signatures) else set()
    with open(spec["counter_path"], "r+b") as fh:
        counter_map = mmap.mmap(fh.fileno(), SHARED_BYTES)
    counter = memoryview(counter_map).cast("Q")  # [0] executions, [1] the running input's length + 1
    running = memoryview(counter_map)[16:]
    state: dict[str, Any] = {"execs": 0, "capped": 0, "slowest": 0.0, "limit": exec_timeout}
    rerun_sites: set[str] = set()  # functions where a cut execution was run again in full
    import_sites: set[str] = set()  # where an import ran past the time-out and was given its allowance
    drop_list = os.path.join(found, DROP_LIST)
    signal.signal(signal.SIGVTALRM, _on_vtalrm)
    setitimer, vtimer = signal.setitimer, signal.ITIMER_VIRTUAL

    def record(kind: str, data: bytes, key: str, detail: Callable[[], str]) -> None:
        """One input per signature; ``detail`` is made only for a new one (a target that raises
        on most inputs formats one traceback per signature, not per execution)."""
        if key in seen:
            return
        if len(seen) >= _MAX_FINDINGS:
            if not state["capped"]:
                state["capped"] = 1
                print(f"symfence: {_MAX_FINDINGS} signatures recorded: no more from this target", file=log)
            return
        seen.add(key)
        # The finding's files first, then its signature (which a restart reads as "reported"): a
        # process ended between the two reports it again, deduplicated by the campaign, instead
        # of never.
        name = os.path.join(found, f"{kind}-{hashlib.sha1(data).hexdigest()}")
        with open(name + ".txt", "w") as fh:
            fh.write(detail())
        with open(name + ".tmp", "wb") as fh:  # the parent takes only whole files
            fh.write(data)
        os.replace(name + ".tmp", name)
        with open(signatures, "a") as fh:
            fh.write(key.replace("\n", " ") + "\n")

    def drop(data: bytes) -> None:
        with open(drop_list, "a") as fh:
            fh.write(hashlib.sha1(data).hexdigest() + "\n")

    def cut_long_executions() -> None:
        state["limit"] = min(exec_timeout, max(_CUT_FLOOR_S, _CUT_TIMES * state["slowest"]))

    def timed(data: bytes, limit: float) -> tuple[BaseException | None, float]:
        """Run the target on ``data`` within ``limit`` s of CPU: what it raised (`_Timeout` past
        the limit), or None and the CPU time it took (from what was left on the timer)."""
        setitimer(vtimer, limit, 0.05)
        try:
            _armed[0] = True
            fn(data)
            _armed[0] = False
        except BaseException as exc:  # noqa: BLE001 - anything the target raises is a finding
            _armed[0] = False
            setitimer(vtimer, 0)
            return exc, 0.0
        return None, limit - setitimer(vtimer, 0)[0]

    def one_input(data: bytes) -> None:
        if not state["execs"]:  # after libFuzzer's own handlers, which faulthandler then chains to
            faulthandler.enable(file=log)  # a native crash leaves the Python stack in the log
            events.entered(Phase.INPUT)
        state["execs"] += 1
        counter[0] = state["execs"]
        if len(data) <= LAST_INPUT_MAX:  # for the parent, if this input ends the process silently
            running[:len(data)] = data
            counter[1] = len(data) + 1
        limit = state["limit"]
        modules = len(sys.modules)
        exc, spent = timed(data, limit)
        warmed = False
        if isinstance(exc, _Timeout) and (len(sys.modules) != modules or _in_import(exc)) \
                and (site := _hang_site(exc)) not in import_sites and len(import_sites) < _MAX_IMPORT_RERUNS:
            # Its time went on modules it imported first (and their instrumentation: docutils' first
            # parse took 1.02 s of CPU, the next 0.006 s), not on the input: once per place, it runs
            # again with the import's allowance, and is a hang only if it still does not end.
            import_sites.add(site)
            exc, spent = timed(data, max(exec_timeout, _IMPORT_ALLOWANCE_S))
            limit, warmed = exec_timeout, True
        if exc is None:
            if spent > state["slowest"] and not warmed:
                state["slowest"] = spent
                if limit < exec_timeout:
                    cut_long_executions()
        elif isinstance(exc, _Timeout):
            drop(data)  # kept, it would hang at every load of the corpus
            site = _hang_site(exc)
            key = f"hang {site}"
            if limit < exec_timeout and key not in seen and site not in rerun_sites \
                    and len(rerun_sites) < _MAX_HANG_RERUNS:
                rerun_sites.add(site)  # cut where no hang was recorded: does it hang in full?
                limit = exec_timeout if isinstance(timed(data, exec_timeout)[0], _Timeout) else limit
            if limit >= exec_timeout:  # a hang by the campaign's measure: recorded once per function
                record("hang", data, key, lambda: f"execution exceeded {exec_timeout:g} s of CPU time"
                       f" (interrupted in {site.rpartition(':')[2]}, {site.rpartition(':')[0]})")
                cut_long_executions()
        else:  # anything else the target raises is a crash
            exc.__traceback__ = exc.__traceback__.tb_next if exc.__traceback__ else None  # our frame
            record("crash", data, _signature(exc),  # a recursion's frames folded first
                   lambda e=exc: compact_traceback("".join(traceback.format_exception(e)), 16000)[-16000:])
        counter[1] = 0

    rss_limit_mb = int(spec["rss_limit_mb"])
    # An allocation past the limit is a MemoryError, a crash here; libFuzzer's own check is then off:
    # it reads the process's peak RSS, which a child inherits from the process that started it (a
    # worker rank past the limit had every fuzz process ended a second after its start, blaming
    # whatever input ran then). Where the limit cannot be set, libFuzzer's check stays.
    own = memory_limit.limit_growth(rss_limit_mb)
    args.append(f"-rss_limit_mb={0 if own else rss_limit_mb}")
    _SETUP(args, one_input, **hooks)
    # A module of the package under test imported while fuzzing (Pillow's format plugins, found
    # on the first Image.open) is instrumented too: instrument_imports() around the harness's
    # imports saw only what they import at once.
    with atheris.instrument_imports(include=under_test) if under_test else contextlib.nullcontext():
        _FUZZ()  # runs until the parent ends the process
    raise RuntimeError("libFuzzer returned")


class LiveHandler:
    def run(self, request: RunTask, events: Events) -> Outcome:
        return fuzz(request, events)

    def close(self) -> None:
        pass


def handler(scratch_dir: str) -> LiveHandler:
    return LiveHandler()
