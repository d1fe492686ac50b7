"""`symfence status OUTDIR`: summarise a campaign from its journal (read-only) and fuzzer_stats."""

from __future__ import annotations

import time
from pathlib import Path

from symfence.coordinator.journal import (
    JOURNAL_NAME,
    Journal,
    JournalError,
    JournalNotFoundError,
    RunRecord,
    lock_holder,
)
from symfence.coordinator.stats import read_stats
from symfence.coordinator.triage import unique_crashes

STATS_NAME = "fuzzer_stats"
QUARANTINE_PREFIX = "quarantined_"
ENGINE_PREFIX = "engine_"  # the concolic engine's counters (coordinator/engine_report.py)


class StatusError(Exception):
    """Why a status report cannot be made, as one line."""


def _pythonpath(outdir: Path) -> list[str]:
    """The campaign's `campaign.pythonpath` from its config snapshot (none if unreadable: the
    report reads the journal; the snapshot only adds where the targets import from)."""
    import json

    from symfence.coordinator.config import ConfigError, import_path, parse
    from symfence.coordinator.preflight import CONFIG_SNAPSHOT

    try:
        return import_path(parse(json.loads((outdir / CONFIG_SNAPSHOT).read_text())))
    except (OSError, ValueError, ConfigError):
        return []


def render_status(outdir: Path) -> str:
    """The report as aligned `key : value` lines. Never writes to OUTDIR's journal."""
    outdir = Path(outdir)
    try:
        journal = Journal.read_only(outdir / JOURNAL_NAME)
    except JournalNotFoundError:
        raise StatusError(
            f"{outdir} holds no campaign journal ({JOURNAL_NAME}): "
            "is it a symfence output directory?"
        ) from None
    except JournalError as exc:
        raise StatusError(str(exc)) from None
    try:
        snap = journal.snapshot()
        findings = unique_crashes(journal, outdir, _pythonpath(outdir))
    finally:
        journal.close()

    total = snap.pending + snap.leased + snap.done + snap.failed
    rows: list[tuple[str, str]] = [
        ("output", str(outdir)),
        ("work", f"{snap.pending} pending, {snap.leased} leased, {snap.done} done, "
                 f"{snap.failed} failed ({total} total)"),
        ("corpus", f"{snap.corpus} entries"),
        ("crashes", str(snap.crashes)),
        ("hangs", str(snap.hangs)),
        ("runs", str(snap.runs)),
        ("last run", _describe_run(snap.last_run, lock_holder(outdir / JOURNAL_NAME))),
    ]
    stats = _read_fuzzer_stats(outdir / STATS_NAME)
    if stats is None:
        rows.append(("quarantine", f"unknown (no {STATS_NAME} yet)"))
    else:
        rows.append(("task errors", stats.get("status_error", "0")))
        rows += [(key, value) for key, value in stats.items() if key.startswith(QUARANTINE_PREFIX)]
        rows += [(key, value) for key, value in stats.items() if key.startswith(ENGINE_PREFIX)]
    width = max(len(key) for key, _ in rows)
    text = "\n".join(f"{key:<{width}} : {value}" for key, value in rows)
    if findings:
        text += "\n\nunique crashes and hangs (identity; first found; size; reproduce):\n" + "\n".join(findings)
    from symfence.coordinator.sharedwork import store_of, store_status_lines

    where = store_of(outdir)
    if where is not None:  # a campaign shared by several coordinators (issue 29): one row each
        try:
            text += "\n\n" + "\n".join(store_status_lines(where))
        except Exception as exc:  # noqa: BLE001 - the local report stands without the store
            text += f"\n\ncampaign store : {where} cannot be read: {exc}"
    return text


def _describe_run(run: RunRecord | None, holder: int | None) -> str:
    """`holder`: the pid holding the journal's lock (0 if unknown), None when nobody holds it."""
    if run is None:
        return "none recorded"
    started = _when(run.started)
    if run.ended is None and holder is not None:
        pid = f" (pid {holder})" if holder else ""
        return f"#{run.run} started {started}, running now{pid}"
    if run.ended is None:
        return (
            f"#{run.run} started {started}, killed or crashed: no coordinator holds the journal "
            "and the run never ended (--resume requeues its leased work)"
        )
    how = "cleanly" if run.clean else "NOT cleanly"
    live = f"; a coordinator (pid {holder}) holds the journal now" if holder else ""
    return f"#{run.run} started {started}, ended {how} {_when(run.ended)}{live}"


def _when(unix_time: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix_time))


def _read_fuzzer_stats(path: Path) -> dict[str, str] | None:
    """The file's `key : value` pairs in file order, or None when there is no file yet."""
    try:
        return read_stats(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StatusError(f"cannot read {path}: {exc.strerror}") from None
