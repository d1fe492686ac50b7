"""Plain Atheris on one harness, as a user runs it: instrumented import, ``atheris.Setup``, ``atheris.Fuzz``.

Usage: ``python -m bench.atheris_driver MODULE:FUNCTION CRASH_DIR [libFuzzer flags...] CORPUS_DIR``
(e.g. ``-max_total_time=60``). The harness module (and what it imports: the parser) is imported
under ``atheris.instrument_imports()``. libFuzzer stops at the first crash and its keep-going
mode (``-fork``) does not work under Python, so the harness is called through a small
keep-going wrapper instead: an exception escaping it is recorded once per signature (exception
type + innermost frame, as symfence dedupes crashes) by writing the input to CRASH_DIR, and the
run goes on. A run longer than ``EXEC_TIMEOUT_S`` is interrupted (SIGALRM) and its input saved
under CRASH_DIR/hangs. The caller (bench.bench_parsers) restarts the driver if libFuzzer itself
stops early (e.g. out of memory) until the budget is used. ``SYMFENCE_ATHERIS_HOOKS`` (comma
separated, e.g. ``RegEx,str``) turns on those Atheris hooks (``atheris.enabled_hooks``) before the
import; ``SYMFENCE_LIBRARY_DICT=FILE`` writes the library's constants to FILE and passes it as
``-dict`` (what symfence's fuzz process adds; ``SYMFENCE_LIBRARY_DICT_LIMIT``: at most that
many): ``bench_harnesses --variants`` measures what each pays. A ``custom_mutator`` or
``custom_crossover`` the harness hands to its own ``atheris.Setup`` is handed to Atheris here too.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import signal
import sys
import traceback
from pathlib import Path

import atheris

EXEC_TIMEOUT_S = 1.0  # the same per-execution limit as the symfence campaigns (exec_timeout_s)


class Hang(BaseException):
    """Raised by SIGALRM inside a run that exceeded EXEC_TIMEOUT_S."""


def _alarm(signum, frame):  # noqa: ANN001
    raise Hang()


def _signature(exc: BaseException) -> str:  # the same key as bench.parser_replay.signature
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else "?"
    return f"{type(exc).__module__}.{type(exc).__qualname__} @ {where}"


def main() -> None:
    spec, crash_dir = sys.argv[1], Path(sys.argv[2])
    del sys.argv[1:3]
    module_name, _, function_name = spec.partition(":")
    for hook in filter(None, os.environ.get("SYMFENCE_ATHERIS_HOOKS", "").split(",")):
        atheris.enabled_hooks.add(hook)
    with atheris.instrument_imports():
        module = importlib.import_module(module_name)
    harness = getattr(module, function_name)
    if dict_path := os.environ.get("SYMFENCE_LIBRARY_DICT"):  # what symfence's fuzz process adds
        from symfence.worker.concolic.harness_imports import harness_imports
        from symfence.worker.fuzz.inplace import in_packages
        from symfence.worker.fuzz.libdict import library_tokens, modules_of, write_dictionary

        limit = int(os.environ.get("SYMFENCE_LIBRARY_DICT_LIMIT") or 1000)
        under_test = in_packages(list(harness_imports(module_name)))
        tokens = library_tokens(modules_of(module_name, under_test), limit)
        write_dictionary(dict_path, tokens)
        sys.argv.insert(1, f"-dict={dict_path}")
    seen: set[str] = set()
    (crash_dir / "hangs").mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGALRM, _alarm)

    def one_input(data: bytes) -> None:
        signal.setitimer(signal.ITIMER_REAL, EXEC_TIMEOUT_S, 0.1)
        try:
            harness(data)
        except Hang:
            signal.setitimer(signal.ITIMER_REAL, 0)
            (crash_dir / "hangs" / f"hang-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
        except BaseException as exc:  # noqa: BLE001 (every escaping exception is a finding)
            signal.setitimer(signal.ITIMER_REAL, 0)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            sig = _signature(exc)
            if sig not in seen:
                seen.add(sig)
                (crash_dir / f"crash-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    from symfence.worker.fuzz.live_child import harness_hooks  # the harness's custom_mutator & co.

    atheris.Setup(sys.argv, one_input, **{k: f for k, _, f in harness_hooks(module) if f is not None})
    atheris.Fuzz()


if __name__ == "__main__":
    main()
