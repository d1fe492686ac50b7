"""Imports Python targets the way a worker's concolic child will, and says why one cannot run.

``python -m symfence.worker.concolic.check SPEC...`` prints one JSON line per target spec,
``{"target": spec, "error": null or "one line"}``; the coordinator runs it before the first
dispatch (``coordinator.preflight``) so a target that cannot be imported stops the campaign
with one line instead of becoming a task error per input. It runs in a fresh process with the
working directory and ``sys.path`` a worker's child would have, so the module is found (or
not) exactly as it will be during the campaign.
"""

from __future__ import annotations

import inspect
import json
import sys

from symfence.worker.concolic.instrument import TargetLoadError, load_target


def _describe(exc: BaseException, module: str) -> str:
    """One line for an exception raised while importing ``module``."""
    if isinstance(exc, SyntaxError):
        where = f"{exc.filename} line {exc.lineno}" if exc.filename else "its source"
        return f"syntax error in {where}: {exc.msg}"
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return (f"importing {module!r} failed: it needs module {exc.name!r}, which is not installed"
                f" for {sys.executable} (a missing dependency?)")
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"importing {module!r} failed: {type(exc).__name__}: {text}".rstrip(": ")


def problem(spec: str) -> str | None:
    """Why the target ``spec`` cannot run, as one line, or None if it loads and takes one argument."""
    module, _, function = spec.partition(":")
    try:
        target = load_target(spec)
    except TargetLoadError as exc:
        cause = exc.__cause__
        missing = getattr(cause, "name", None) if isinstance(cause, ModuleNotFoundError) else None
        if str(exc).startswith("no module named") or (
                missing and (missing == module or module.startswith(missing + "."))):
            return (f"no module named {missing or module!r} on the search path (the working"
                    " directory first, then PYTHONPATH): run symfence from the folder that holds it")
        return _describe(cause, module) if cause is not None else str(exc)
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt at import time
        return _describe(exc, module)
    try:
        inspect.signature(target).bind(b"")
    except TypeError:
        return f"{function}() must accept one argument (the input bytes)"
    except ValueError:
        pass  # no signature available (a builtin): assume it is callable with one argument
    return None


def main(argv: list[str]) -> int:
    for spec in argv:
        print(json.dumps({"target": spec, "error": problem(spec)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
