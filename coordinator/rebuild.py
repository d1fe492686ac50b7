"""`symfence recover OUT --config CFG`: rebuild a damaged journal from queue/, crashes/ and hangs/.

The damaged journal (and its -wal and -shm) is renamed aside, never deleted. A new journal gets
the config's seeds (queue ids 0..k-1, as a fresh campaign would), then every queue file whose
parent it already knows, in id order, and every crash and hang of a configured target
(`reconcile.py` does both and moves anything else to `OUT/orphaned/`). Every work item of the
rebuilt journal is pending: which ones were done is not in the files, so `--resume` runs them
again; what they find again is recognised and skipped, so no input or finding is doubled.
Counters and the coverage map start from zero.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from symfence.coordinator.config import ConfigError, load
from symfence.coordinator.failure import ExitCode
from symfence.coordinator.journal import JOURNAL_NAME, Journal, JournalError, NewEntry, lock_holder
from symfence.coordinator.outputs import OutputDir
from symfence.protocol.ids import sha256_hex, work_id_for


def _say(line: str) -> None:
    print(f"symfence: {line}", file=sys.stderr, flush=True)


def move_journal_aside(path: Path) -> Path:
    """Rename journal.sqlite and its side files to journal.sqlite.damaged-<time>[-wal|-shm]."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    base = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 0
    while base.exists():
        n += 1
        base = path.with_name(f"{path.name}.damaged-{stamp}.{n}")
    for suffix in ("", "-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        if side.exists():
            os.replace(side, Path(f"{base}{suffix}"))
    return base


def rebuild(out_root: Path, cfg) -> tuple[Path | None, dict[str, int]]:
    """Rebuild OUT's journal; returns where the old one went and what the new one holds."""
    from symfence.coordinator.campaign import executor_options, load_seeds
    from symfence.coordinator.reconcile import reconcile

    path = out_root / JOURNAL_NAME
    if lock_holder(path) is not None:
        raise JournalError(f"{path} is in use by a running coordinator: stop it first")
    moved = move_journal_aside(path) if path.exists() else None
    out = OutputDir(out_root)
    from symfence.coordinator.hybrid import HybridPlan

    executor = HybridPlan.from_config(cfg).corpus_stage.value  # the executor named in work ids
    options = executor_options(cfg)
    journal = Journal.open(path, resume=False, synchronous=cfg["journal.synchronous"])
    try:
        seeds = []
        for target in cfg["campaign.targets"]:
            for data in load_seeds(cfg):
                sha = sha256_hex(data)
                seeds.append(NewEntry(data=data, sha256=sha, target=target, origin="seed", parent=None,
                                      work_id=work_id_for(executor, target, sha, 0, options)))
        journal.add_seeds(seeds)
        journal.flush()  # seeds keep ids 0..k-1: their files (if unchanged) match them
        report = reconcile(journal, out, executor=executor, options=options,
                           targets=cfg["campaign.targets"])
        snap = journal.snapshot()
    finally:
        journal.close()
    return moved, {"corpus": snap.corpus, "seeds": len(seeds), "readmitted": report.readmitted,
                   "crashes": snap.crashes, "hangs": snap.hangs, "moved_aside": len(report.moved_aside)}


def run_recover(out_root: Path, config: str) -> int:
    try:
        cfg = load(config)
    except ConfigError as exc:
        _say(f"config error: {exc}")
        return ExitCode.CONFIG
    if not (out_root / "queue").is_dir():
        _say(f"recover: {out_root} holds no queue/ folder: nothing to rebuild from")
        return ExitCode.CONFIG
    try:
        moved, n = rebuild(out_root, cfg)
    except (JournalError, OSError) as exc:
        _say(f"recover failed: {exc}")
        return ExitCode.STORAGE
    kept = f"the damaged journal is kept as {moved.name}" if moved else "there was no journal"
    print(
        f"symfence: rebuilt {out_root / JOURNAL_NAME}: {n['corpus']} corpus entries ({n['seeds']} seeds,"
        f" {n['readmitted']} re-admitted from queue/, crashes/, hangs/), {n['crashes']} crashes,"
        f" {n['hangs']} hangs, {n['moved_aside']} files moved to orphaned/; {kept}; all work is pending:"
        f" continue with `symfence run {config} --out {out_root} --resume`",
        flush=True,
    )
    return ExitCode.OK
