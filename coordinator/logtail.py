"""`symfence logs`: tail and filter a campaign's JSON-lines logs, one readable line per event."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, TextIO

FIRST_KEYS = ("reason", "source_rank", "owner_rank", "token", "work_id", "kind", "detail")


def format_event(e: dict[str, Any]) -> str:
    ts = datetime.fromtimestamp(float(e.get("ts", 0))).strftime("%H:%M:%S.%f")[:-3]
    rank = e.get("rank", "?")
    keys = [k for k in FIRST_KEYS if k in e] + sorted(k for k in e if k not in FIRST_KEYS)
    skip = {"ts", "rank", "event", "level", "role"}
    fields = " ".join(f"{k}={e[k]}" for k in keys if k not in skip and e[k] is not None)
    return f"{ts} r{rank:<2} {e.get('level', ''):<7} {e.get('event', '?'):<22} {fields}"


def matches(e: dict[str, Any], events: list[str] | None, reasons: list[str] | None) -> bool:
    if events and e.get("event") not in events:
        return False
    if reasons and e.get("reason") not in reasons:
        return False
    return True


def log_files(outdir: Path, ranks: list[int] | None) -> list[Path]:
    files = sorted((outdir / "logs").glob("*.jsonl"))
    if ranks is not None:
        names = {("coordinator.jsonl" if r == 0 else f"worker-{r}.jsonl") for r in ranks}
        files = [f for f in files if f.name in names]
    return files


def _read_new(fh: TextIO, partial: dict[TextIO, str]) -> Iterator[dict[str, Any]]:
    chunk = partial.pop(fh, "") + fh.read()
    lines = chunk.split("\n")
    if lines[-1]:
        partial[fh] = lines[-1]  # incomplete last line: keep for the next read
    for line in lines[:-1]:
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                yield {"event": "logs.unparsable_line", "level": "error", "detail": line[:200]}


def run_logs(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    outdir = Path(args.outdir)
    if not (outdir / "logs").is_dir():
        print(f"symfence: {outdir} has no logs/ directory", file=sys.stderr)
        return 1
    handles: dict[Path, TextIO] = {}
    partial: dict[TextIO, str] = {}

    def emit_all() -> int:
        for path in log_files(outdir, args.rank):
            if path not in handles:
                handles[path] = path.open("r", encoding="utf-8")
        batch = [e for fh in handles.values() for e in _read_new(fh, partial)]
        batch.sort(key=lambda e: float(e.get("ts", 0)))
        for e in batch:
            if matches(e, args.event, args.reason):
                out.write((json.dumps(e) if args.json else format_event(e)) + "\n")
        out.flush()
        return len(batch)

    try:
        emit_all()
        while args.follow:
            if not emit_all():
                time.sleep(0.25)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        pass
    finally:
        for fh in handles.values():
            fh.close()
    return 0
