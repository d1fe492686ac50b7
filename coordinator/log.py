"""Structured logging setup: JSON lines to a file for every rank, pretty console on a TTY."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, TextIO

import structlog

from symfence.coordinator.logtail import escape

# High-volume events stay out of the console (the status line counts them); they are all in
# the JSON file, where `symfence logs` filters them.
QUIET_ON_CONSOLE = frozenset({"result.quarantined", "task.expired", "fault.injected", "work.refused"})
# Events whose traceback stays in the file: their one-line message says so.
TRACEBACK_IN_FILE_ONLY = frozenset({"campaign.failed"})

# The first failed write to a log file (a full or read-only disk). Logging goes on on the
# console; the campaign loop calls `check_file()` and stops, as after any other failed write.
_file_error: OSError | None = None


def check_file() -> None:
    """Raise the log file's first write error, if there was one."""
    if _file_error is not None:
        raise _file_error


class _Tee:
    """Final processor: one JSON line to the file, optionally a rendered line to the console."""

    def __init__(self, file: TextIO, console: TextIO | None, verbose: bool) -> None:
        self.file = file
        self._console = console
        self.verbose = verbose
        self.renderer: structlog.dev.ConsoleRenderer | None = None
        if console is not None:  # worker ranks log to their file only: no console renderer (nor rich)
            from symfence.coordinator.status_line import on_terminal

            self.renderer = structlog.dev.ConsoleRenderer(colors=on_terminal(console))

    @property
    def console(self) -> TextIO | None:
        # sys.stderr is looked up per event: the live status line redirects it to print above.
        return sys.stderr if self._console is sys.__stderr__ or self._console is sys.stderr else self._console

    def __call__(self, logger: Any, name: str, event_dict: MutableMapping[str, Any]) -> Any:
        global _file_error
        if _file_error is None:
            try:
                self.file.write(json.dumps(event_dict, default=str, separators=(",", ":")) + "\n")
            except OSError as exc:
                _file_error = exc if exc.filename else OSError(exc.errno, exc.strerror, self.file.name)
        if self.console is not None and (self.verbose or event_dict["event"] not in QUIET_ON_CONSOLE):
            hidden = ("ts", "exception") if event_dict["event"] in TRACEBACK_IN_FILE_ONLY else ("ts",)
            # Values can carry worker-supplied text: never let it reach the terminal raw.
            # (`exception` is our own traceback, rendered by structlog on several lines.)
            shown = {escape(k): v if isinstance(v, (int, float, bool)) or v is None or k == "exception" else escape(v)
                     for k, v in event_dict.items() if k not in hidden}
            assert self.renderer is not None  # made whenever there is a console
            self.console.write(self.renderer(logger, name, shown) + "\n")
            self.console.flush()
        raise structlog.DropEvent


def close(handle: TextIO) -> None:
    """Close a log file opened by `configure`; a failed final write (a full disk) is recorded as
    the file's first error, never raised: the campaign already reports storage failures."""
    global _file_error
    try:
        handle.close()
    except OSError as exc:
        if _file_error is None:
            _file_error = exc


def _unix_ts(logger: Any, name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    event_dict["ts"] = round(time.time(), 6)
    return event_dict


def configure(log_file: Path, *, console: TextIO | None = sys.stderr, verbose: bool = False,
              forward: Any = None, **bind: Any) -> TextIO:
    """Route structlog to `log_file` (JSON lines, line-buffered so `logs --follow` sees them).

    `bind` adds fixed keys (e.g. rank) to every event; `forward`, a processor, sees each event
    before it is written (a worker's copy to rank 0). Returns the open file for closing."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handle = log_file.open("a", buffering=1, encoding="utf-8")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _unix_ts,
            structlog.processors.format_exc_info,
            *([forward] if forward is not None else []),
            _Tee(handle, console, verbose),
        ],
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(**bind)
    return handle
