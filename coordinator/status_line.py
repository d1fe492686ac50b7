"""The live status line: a rich one-liner on a TTY, plain periodic lines otherwise."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text


# `symfence run` sets this when it is on a terminal: under mpiexec, rank 0's stdout is a pipe
# that the launcher copies to that terminal, so isatty() alone would say no.
TTY_ENV = "SYMFENCE_TTY"


def on_terminal(stream: TextIO) -> bool:
    return stream.isatty() or os.environ.get(TTY_ENV) == "1"


@dataclass(frozen=True)
class Snapshot:
    elapsed_s: float
    execs_per_s: float
    results_per_s: float
    edges: int
    queue: int
    pending: int
    crashes: int
    hangs: int
    in_flight: int
    quarantined: int
    workers: int


def render(s: Snapshot) -> str:
    m, sec = divmod(int(s.elapsed_s), 60)
    return (
        f"[{m:02d}:{sec:02d}] execs/s {s.execs_per_s:,.0f}  results/s {s.results_per_s:,.0f}  "
        f"edges {s.edges}  queue {s.queue} (pending {s.pending})  crashes {s.crashes}  "
        f"hangs {s.hangs}  in-flight {s.in_flight}  quarantined {s.quarantined}  workers {s.workers}"
    )


class StatusLine:
    """`update` as often as you like; a TTY gets a live line, a pipe a line every `every_s`."""

    def __init__(self, stream: TextIO = sys.stdout, every_s: float = 5.0, enabled: bool = True) -> None:
        self.enabled = enabled
        self.stream = stream
        self.every_s = every_s
        self._last = 0.0
        self._live: Live | None = None
        if enabled and on_terminal(stream):
            console = Console(file=stream, force_terminal=True)
            self._live = Live(Text(""), console=console, refresh_per_second=4, transient=False)
            self._live.start()

    def update(self, snap: Snapshot) -> None:
        if not self.enabled:
            return
        line = render(snap)
        if self._live is not None:
            self._live.update(Text(line, style="bold"))
        elif time.monotonic() - self._last >= self.every_s:
            self._last = time.monotonic()
            print(line, file=self.stream, flush=True)

    def close(self, final: Snapshot | None = None) -> None:
        if self._live is not None:
            if final is not None:
                self._live.update(Text(render(final), style="bold"))
            self._live.stop()
        elif final is not None and self.enabled:
            print(render(final), file=self.stream, flush=True)
