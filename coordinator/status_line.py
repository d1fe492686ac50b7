"""The live view: a few rich lines on a terminal (one per target), a plain headline line otherwise."""

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
class TargetLine:
    name: str
    corpus: int
    edges: int
    crashes: int
    hangs: int
    execs: int
    errors: int
    since_find_s: float | None  # None: no new path yet


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
    ooms: int = 0
    task_errors: int = 0
    since_path_s: float | None = None  # time since the last new corpus entry (None: none yet)
    since_crash_s: float | None = None
    since_hang_s: float | None = None
    solver_s: float = 0.0
    solver_queries: int = 0
    solver_timeouts: int = 0  # queries that ended "unknown" (the solver time-out)
    map_density: float = 0.0  # percent of the 64 KiB edge map
    memory_mb: int = 0  # coordinator's resident memory
    workers_memory_mb: int = 0  # workers' and their executor children's, from heartbeats
    targets: tuple[TargetLine, ...] = ()
    quarantine_reasons: tuple[tuple[str, int], ...] = ()  # non-zero reasons only
    conservation_ok: bool = True
    show_quarantine: bool = False  # `--show-quarantine`: always show quarantine/conservation
    stages: str = ""  # per-stage figures (coordinator.hybrid.HybridPlan.status_text)
    refused: str = ""  # honest ranks' results refused (coordinator.refusals): shown at once


def ago(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s ago"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m ago"


def _clock(s: Snapshot) -> str:
    h, rest = divmod(int(s.elapsed_s), 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def render(s: Snapshot) -> str:
    """The headline: one line (what a pipe or a log gets every few seconds)."""
    oom = f" ({s.ooms} oom)" if s.ooms else ""
    line = (
        f"[{_clock(s)}] execs/s {s.execs_per_s:,.0f}  results/s {s.results_per_s:,.0f}  "
        f"edges {s.edges} ({s.map_density:.2f}%)  queue {s.queue} (pending {s.pending})  "
        f"crashes {s.crashes}{oom}  hangs {s.hangs}  last path {ago(s.since_path_s)}  "
        f"in-flight {s.in_flight}  workers {s.workers}"
        + (f"  | {s.stages}" if s.stages else "")
    )
    if s.task_errors:
        line += f"  TASK ERRORS {s.task_errors}"
    if s.quarantined or s.show_quarantine:
        line += f"  quarantined {s.quarantined}"
    if s.refused:
        line += f"  {s.refused}"
    return line


def render_lines(s: Snapshot) -> list[str]:
    """The full live view: progress, finds, engine and memory, one line per target, and the
    fence's quarantine/conservation only when something is off (or asked for)."""
    lines = [
        f"symfence [{_clock(s)}]  workers {s.workers}  execs/s {s.execs_per_s:,.0f}  results/s "
        f"{s.results_per_s:,.0f}  in flight {s.in_flight}",
        f"  paths   corpus {s.queue} (pending {s.pending})  edges {s.edges}  map density {s.map_density:.2f}%  "
        f"last new path {ago(s.since_path_s)}",
        f"  finds   crashes {s.crashes}" + (f" ({s.ooms} out of memory)" if s.ooms else "")
        + f", last {ago(s.since_crash_s)}  hangs {s.hangs}, last {ago(s.since_hang_s)}"
        + f"  task errors {s.task_errors}",
        f"  engine  solver {s.solver_s:.1f}s over {s.solver_queries} queries, {s.solver_timeouts} timed out"
        f"  memory: coordinator {s.memory_mb} MB, workers {s.workers_memory_mb} MB",
    ]
    if s.stages:
        lines.append(f"  stages  {s.stages}")
    width = max((len(t.name) for t in s.targets), default=0)
    for t in s.targets:
        err = f"  errors {t.errors}" if t.errors else ""
        lines.append(f"  {t.name:<{width}}  corpus {t.corpus}  edges {t.edges}  crashes {t.crashes}  "
                     f"hangs {t.hangs}  execs {t.execs}  last new path {ago(t.since_find_s)}{err}")
    if s.quarantined or s.show_quarantine or not s.conservation_ok:
        reasons = ", ".join(f"{r} {n}" for r, n in s.quarantine_reasons) or "none"
        lines.append(f"  fence   quarantined {s.quarantined} ({reasons})  conservation "
                     f"{'ok' if s.conservation_ok else 'VIOLATED'}")
    if s.refused:
        lines.append(f"  {s.refused}")
    return lines


class StatusLine:
    """`update` as often as you like; a TTY gets the live view, a pipe the headline every `every_s`."""

    def __init__(self, stream: TextIO = sys.stdout, every_s: float = 5.0, enabled: bool = True,
                 show_quarantine: bool = False) -> None:
        self.enabled = enabled
        self.show_quarantine = show_quarantine
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
        if self._live is not None:
            self._live.update(Text("\n".join(render_lines(snap)), style="bold"))
        elif time.monotonic() - self._last >= self.every_s:
            self._last = time.monotonic()
            print(render(snap), file=self.stream, flush=True)

    def close(self, final: Snapshot | None = None) -> None:
        if self._live is not None:
            if final is not None:
                self._live.update(Text("\n".join(render_lines(final)), style="bold"))
            self._live.stop()
        elif final is not None and self.enabled:
            print(render(final), file=self.stream, flush=True)
