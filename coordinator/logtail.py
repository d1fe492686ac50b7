"""`symfence logs`: tail and filter a campaign's JSON-lines logs, one readable line per event."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, TextIO

# Worker-supplied text (error text, host names, info keys) is printed escaped: a newline must
# not forge a log line, an ANSI sequence must not reach the terminal (issue 10).
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def escape(value: Any) -> str:
    """`value` as one line of inert text: control, bidi and line-separator characters escaped."""
    text = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


FIRST_KEYS = ("reason", "source_rank", "owner_rank", "token", "work_id", "kind", "detail")


def format_event(e: dict[str, Any]) -> str:
    try:
        ts = datetime.fromtimestamp(float(e.get("ts", 0))).strftime("%H:%M:%S.%f")[:-3]
    except (TypeError, ValueError, OverflowError, OSError):
        ts = "??:??:??.???"
    rank = e.get("rank", "?")
    keys = [k for k in FIRST_KEYS if k in e] + sorted(k for k in e if k not in FIRST_KEYS)
    skip = {"ts", "rank", "event", "level", "role"}
    fields = " ".join(f"{escape(k)}={escape(e[k])}" for k in keys if k not in skip and e[k] is not None)
    return f"{ts} r{escape(rank):<2} {escape(e.get('level', '')):<7} {escape(e.get('event', '?')):<22} {fields}"


def _ts(e: dict[str, Any]) -> float:
    try:
        return float(e.get("ts", 0))
    except (TypeError, ValueError):
        return 0.0


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


def _file_rank(path: Path) -> int | None:
    if path.name == "coordinator.jsonl":
        return 0
    m = re.fullmatch(r"worker-(\d+)\.jsonl", path.name)
    return int(m.group(1)) if m else None


def _from_file(e: dict[str, Any], path: Path) -> dict[str, Any]:
    """A line's rank is the rank of the file it is in: a worker cannot speak for rank 0."""
    rank = _file_rank(path)
    if rank is not None and e.get("rank") != rank:
        if "rank" in e:
            e["claimed_rank"] = e["rank"]
        e["rank"] = rank
    return e


def _read_new(fh: TextIO, partial: dict[TextIO, str]) -> Iterator[dict[str, Any]]:
    chunk = partial.pop(fh, "") + fh.read()
    lines = chunk.split("\n")
    if lines[-1]:
        partial[fh] = lines[-1]  # incomplete last line: keep for the next read
    for line in lines[:-1]:
        if line.strip():
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                e = None
            if isinstance(e, dict):
                yield e
            else:
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
        batch = [_from_file(e, path) for path, fh in handles.items() for e in _read_new(fh, partial)]
        batch.sort(key=_ts)
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
