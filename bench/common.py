"""Helpers shared by the benchmarks: run a campaign under mpiexec, write tables and JSON."""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from tests.mpi_helpers import run_campaign

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> str:
    import os

    return f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}"


def campaign(tmp: Path, cfg: dict[str, dict[str, Any]], ranks: int, timeout_s: float = 300):
    tmp.mkdir(parents=True, exist_ok=True)
    run = run_campaign(tmp, cfg, ranks=ranks, timeout_s=timeout_s)
    if run.code != 0:
        raise SystemExit(f"benchmark campaign failed ({run.code}):\n{run.stderr[-2000:]}")
    return run


def table(headers: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def save(name: str, headers: list[str], rows: list[list[Any]], extra: dict[str, Any] | None = None,
         folder: Path | None = None) -> str:
    folder = folder or RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    text = table(headers, rows)
    payload = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine(),
               "command": " ".join([Path(sys.executable).name, *sys.argv]), "headers": headers, "rows": rows,
               **(extra or {})}
    (folder / f"{name}.json").write_text(json.dumps(payload, indent=2))
    (folder / f"{name}.md").write_text(text + "\n")
    return text
