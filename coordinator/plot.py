"""`symfence plot OUTDIR`: PNG charts of a campaign over time, from its plot_data and plot_targets.

Reads the files by column name (not position), so it draws whatever a campaign wrote: AFL++'s
columns, symfence's own, and any further columns (``<stage>_<metric>`` per stage, engine
counters) as one chart per metric with a line per stage. Works on a running campaign too (it only reads). matplotlib draws with the Agg backend, so
no display is needed.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from symfence.coordinator.afl import AFL_PLOT_COLUMNS, SYMFENCE_PLOT_COLUMNS
from symfence.coordinator.targets import PLOT_TARGETS

# chart file -> (title, y label, columns of plot_data drawn in it)
CHARTS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "coverage.png": ("Coverage", "edges", ("edges_found",)),
    "execs.png": ("Execution speed", "per second", ("execs_per_sec", "results_per_sec")),
    "corpus.png": ("Corpus", "inputs", ("corpus_count", "pending_total", "cur_item")),
    "findings.png": ("Findings", "count", ("saved_crashes", "saved_hangs", "saved_oom", "task_errors")),
    "quarantine.png": ("Fence", "results", ("quarantined", "in_flight")),
}
_KNOWN = set(AFL_PLOT_COLUMNS) | set(SYMFENCE_PLOT_COLUMNS)
TARGET_METRICS = ("corpus_count", "edges_found", "saved_crashes", "execs_done")


class PlotError(Exception):
    """Why nothing can be drawn, as one line."""


def _number(text: str) -> float | None:
    try:
        return float(text.strip().rstrip("%"))
    except ValueError:
        return None


def read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    """A `# a, b, c` header and comma-separated rows (plot_data's format)."""
    lines = [l for l in path.read_text().splitlines() if l.strip()]
    if not lines or not lines[0].startswith("#"):
        raise PlotError(f"{path} has no '# column, ...' header")
    header = [c.strip() for c in lines[0].lstrip("#").split(",")]
    rows = [[c.strip() for c in l.split(",")] for l in lines[1:] if not l.startswith("#")]
    return header, [r for r in rows if len(r) == len(header)]


def columns(header: list[str], rows: list[list[str]]) -> dict[str, list[float | None]]:
    return {name: [_number(r[i]) for r in rows] for i, name in enumerate(header)}


def plot_campaign(outdir: Path, dest: Path | None = None) -> list[Path]:
    """Write the charts; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir = Path(outdir)
    source = outdir / "plot_data"
    if not source.exists():
        raise PlotError(f"{outdir} holds no plot_data: is it a symfence output directory?")
    header, rows = read_table(source)
    if "relative_time" not in header:
        raise PlotError(f"{source} has no relative_time column")
    if len(rows) < 2:
        raise PlotError(f"{source} has {len(rows)} data row(s): let the campaign run a little longer")
    data = columns(header, rows)
    time_s = data["relative_time"]
    dest = Path(dest) if dest else outdir / "plots"
    dest.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def chart(name: str, title: str, ylabel: str, series: dict[str, tuple[list[float | None], list[float | None]]]) -> None:
        fig, ax = plt.subplots(figsize=(10, 3.2))
        for label, (xs, ys) in series.items():
            points = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], label=label, linewidth=2)
        ax.set_title(f"{title} - {outdir.name}")
        ax.set_xlabel("campaign time (s, across --resume)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if series:
            ax.legend(loc="upper left", fontsize="small")
        fig.tight_layout()
        path = dest / name
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)

    for name, (title, ylabel, wanted) in CHARTS.items():
        present = {c: (time_s, data[c]) for c in wanted if c in data}
        if present:
            chart(name, title, ylabel, present)
    # Columns other parts of symfence add (`<stage>_<metric>` per stage, `engine_<counter>`):
    # one chart per metric, one line per stage, so stages are compared on the same scale.
    groups: dict[str, list[str]] = defaultdict(list)
    for c in header:
        if c not in _KNOWN and any(v is not None for v in data[c]):
            groups[c.partition("_")[2] or c].append(c)
    for metric, cols in groups.items():
        chart(f"stages_{metric}.png", f"{metric} per stage", metric, {c: (time_s, data[c]) for c in cols})

    targets_file = outdir / PLOT_TARGETS
    if targets_file.exists():
        t_header, t_rows = read_table(targets_file)
        if {"relative_time", "target"} <= set(t_header):
            ti, ni = t_header.index("relative_time"), t_header.index("target")
            per: dict[str, list[list[str]]] = defaultdict(list)
            for r in t_rows:
                per[r[ni]].append(r)
            for metric in (m for m in TARGET_METRICS if m in t_header):
                mi = t_header.index(metric)
                chart(f"targets_{metric}.png", f"{metric} per target", metric,
                      {t: ([_number(r[ti]) for r in rs], [_number(r[mi]) for r in rs]) for t, rs in per.items()})
    return written
