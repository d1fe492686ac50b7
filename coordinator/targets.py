"""Per-target progress: corpus, edges, findings, execs and last find of each target, and its plot file.

A campaign fuzzes several targets at once; the live view shows one line per target and
``plot_targets`` (CSV, one row per target per stats interval, appended across --resume) lets
``symfence plot`` draw each target's curves. Edges are attributed to the target whose input
first reached them (targets are different code, so this is their coverage). Corpus and
findings are rebuilt from the journal on --resume; edges, execs and task counts are carried
in the journal's counters (``target_<field>:<target>``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Mapping

PLOT_TARGETS = "plot_targets"
PLOT_TARGETS_COLUMNS = ("relative_time", "target", "corpus_count", "edges_found", "saved_crashes", "saved_hangs",
                        "execs_done", "tasks", "task_errors")
_CARRIED = ("edges", "execs", "tasks", "errors")


@dataclass
class TargetProgress:
    corpus: int = 0
    edges: int = 0
    crashes: int = 0
    hangs: int = 0
    execs: int = 0
    tasks: int = 0
    errors: int = 0
    last_find: float = 0.0  # unix time of its newest corpus entry (0: none this campaign)


class TargetTracker:
    def __init__(self, targets: Iterable[str]) -> None:
        self.by_target: dict[str, TargetProgress] = {t: TargetProgress() for t in targets}

    def __getitem__(self, target: str) -> TargetProgress:
        p = self.by_target.get(target)
        return p if p is not None else self.by_target.setdefault(target, TargetProgress())

    # --- resume -------------------------------------------------------------------------------

    def restore(self, counters: Mapping[str, int], corpus_targets: Iterable[str],
                finding_targets: Iterable[tuple[str, str]]) -> None:
        for name, value in counters.items():
            kind, sep, target = name.partition(":")
            field = kind.removeprefix("target_")
            if sep and kind.startswith("target_") and field in _CARRIED:
                setattr(self[target], field, int(value))
        for target in corpus_targets:
            self[target].corpus += 1
        for kind, target in finding_targets:
            if kind == "crash":
                self[target].crashes += 1
            else:
                self[target].hangs += 1

    def counters(self) -> dict[str, int]:
        return {f"target_{f}:{t}": int(getattr(p, f)) for t, p in self.by_target.items() for f in _CARRIED}

    # --- plot_targets -------------------------------------------------------------------------

    def append_plot(self, out: Path, relative_time: float) -> None:
        path = out / PLOT_TARGETS
        header = "# " + ", ".join(PLOT_TARGETS_COLUMNS) + "\n"
        if not path.exists():
            path.write_text(header)
        with path.open("a") as fh:
            for target, p in self.by_target.items():
                fh.write(f"{relative_time:.1f}, {target}, {p.corpus}, {p.edges}, {p.crashes}, {p.hangs}, {p.execs},"
                         f" {p.tasks}, {p.errors}\n")


assert {f.name for f in fields(TargetProgress)} >= set(_CARRIED)
