"""Structured logging setup: JSON lines to a file for every rank, pretty console on a TTY."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import structlog

from symfence.coordinator.status_line import on_terminal

# High-volume events stay out of the console (the status line counts them); they are all in
# the JSON file, where `symfence logs` filters them.
QUIET_ON_CONSOLE = frozenset({"result.quarantined", "task.expired", "fault.injected", "work.refused"})


class _Tee:
    """Final processor: one JSON line to the file, optionally a rendered line to the console."""

    def __init__(self, file: TextIO, console: TextIO | None, verbose: bool) -> None:
        self.file = file
        self._console = console
        self.verbose = verbose
        self.renderer = structlog.dev.ConsoleRenderer(colors=bool(console and on_terminal(console)))

    @property
    def console(self) -> TextIO | None:
        # sys.stderr is looked up per event: the live status line redirects it to print above.
        return sys.stderr if self._console is sys.__stderr__ or self._console is sys.stderr else self._console

    def __call__(self, logger: Any, name: str, event_dict: dict[str, Any]) -> Any:
        self.file.write(json.dumps(event_dict, default=str, separators=(",", ":")) + "\n")
        if self.console is not None and (self.verbose or event_dict["event"] not in QUIET_ON_CONSOLE):
            shown = {k: v for k, v in event_dict.items() if k != "ts"}
            self.console.write(self.renderer(logger, name, shown) + "\n")
            self.console.flush()
        raise structlog.DropEvent


def _unix_ts(logger: Any, name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    event_dict["ts"] = round(time.time(), 6)
    return event_dict


def configure(log_file: Path, *, console: TextIO | None = sys.stderr, verbose: bool = False, **bind: Any) -> TextIO:
    """Route structlog to `log_file` (JSON lines, line-buffered so `logs --follow` sees them).

    `bind` adds fixed keys (e.g. rank) to every event. Returns the open file for closing."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handle = log_file.open("a", buffering=1, encoding="utf-8")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _unix_ts,
            structlog.processors.format_exc_info,
            _Tee(handle, console, verbose),
        ],
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(**bind)
    return handle
