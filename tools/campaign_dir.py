"""Reads a campaign's output directory for the offline tools: its own config, targets and saved inputs.

A campaign's ``OUT/`` holds what these tools need: ``campaign.json`` (the effective config the
run used, every key filled in: executor, targets, executor options, the per-input time limit),
and ``journal.sqlite`` (opened read-only, so a running campaign can be inspected): every saved
crash and hang (input, target, the saved traceback) and every corpus entry. Files in
``crashes/``, ``hangs/`` and ``queue/`` are matched to their journal records by their
``id:NNNNNN`` prefix. Targets are resolved from the current working directory, as
``symfence run`` resolved them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from symfence.coordinator.config import (PYTHON_EXECUTORS, Config, ConfigError, exec_timeout_s, import_path,
                                         parse)
from symfence.coordinator.engines import TargetKind, target_of
from symfence.coordinator.journal import JOURNAL_NAME, Journal, JournalError, JournalNotFoundError
from symfence.coordinator.outputs import OutputDir
from symfence.coordinator.preflight import CONFIG_SNAPSHOT
from symfence.protocol.childenv import put_first_on_path

_ID = re.compile(r"^id:(\d{6,})")
FOLDERS = {"crash": "crashes", "hang": "hangs", "queue": "queue"}


class CampaignDirError(Exception):
    """Why OUT cannot be used, as one line (exit status 2)."""


@dataclass(frozen=True)
class SavedInput:
    """One saved input of a campaign: a crash, a hang or a corpus entry."""

    kind: str  # "crash", "hang" or "queue"
    ident: int  # finding id (per kind) or queue id
    target: str
    data: bytes
    detail: str = ""  # the saved traceback or reason ("" for a corpus entry)
    path: Path | None = None  # its file under OUT, when written
    name: str = ""  # its file name (queue entries: as `queue/` names them)
    identity: str = ""  # a finding's crash identity as the campaign saved it ("" before identities)
    minimized: bytes | None = None  # a finding's minimized input, once the campaign minimized it

    @property
    def label(self) -> str:
        """Short and unique in one campaign: ``crashes/id:000002``."""
        return f"{FOLDERS[self.kind]}/id:{self.ident:06d}"


@dataclass(frozen=True)
class CampaignDir:
    root: Path
    cfg: Config

    @classmethod
    def open(cls, root: Path | str) -> CampaignDir:
        root = Path(root)
        if not root.is_dir():
            raise CampaignDirError(f"{root} is not a directory (a campaign's output directory, --out)")
        snap = root / CONFIG_SNAPSHOT
        try:
            raw = json.loads(snap.read_text())
        except FileNotFoundError:
            raise CampaignDirError(f"{root} holds no {CONFIG_SNAPSHOT}: is it a symfence output"
                                   " directory?") from None
        except (OSError, ValueError) as exc:
            raise CampaignDirError(f"cannot read {snap}: {exc}") from None
        try:
            cfg = parse(raw, snap)
        except ConfigError as exc:
            raise CampaignDirError(f"{snap}: {exc}") from None
        put_first_on_path(import_path(cfg))  # the targets import here and in the replays as in the run
        return cls(root, cfg)

    # -- the campaign's settings -------------------------------------------------------------

    @property
    def executor(self) -> str:
        return self.cfg["campaign.executor"]

    @property
    def native(self) -> bool:
        return target_of(self.executor) is TargetKind.NATIVE  # (the engine registry's spec)

    @property
    def python(self) -> bool:
        return self.executor in PYTHON_EXECUTORS

    @property
    def targets(self) -> list[str]:
        return list(self.cfg["campaign.targets"])

    @property
    def timeout_s(self) -> float:
        return exec_timeout_s(self.cfg)

    # -- saved inputs -------------------------------------------------------------------------

    def _journal(self) -> Journal:
        try:
            return Journal.read_only(self.root / JOURNAL_NAME)
        except JournalNotFoundError:
            raise CampaignDirError(f"{self.root} holds no campaign journal ({JOURNAL_NAME})") from None
        except JournalError as exc:
            raise CampaignDirError(str(exc)) from None

    def _files(self, kind: str) -> dict[int, Path]:
        folder = self.root / FOLDERS[kind]
        found: dict[int, Path] = {}
        if folder.is_dir():
            for p in folder.iterdir():
                m = _ID.match(p.name)
                if m and not p.name.startswith("."):
                    found[int(m.group(1))] = p
        return found

    def findings(self) -> list[SavedInput]:
        """Every saved crash, then every hang, in id order."""
        journal = self._journal()
        try:
            rows = list(journal.iter_findings())
            triage = journal.triage()
        finally:
            journal.close()
        files = {kind: self._files(kind) for kind in ("crash", "hang")}
        out = []
        for f in rows:
            identity, _, minimized, _ = triage.get((f.kind.value, f.finding_id), ("", "", None, None))
            path = files[f.kind.value].get(f.finding_id)
            out.append(SavedInput(f.kind.value, f.finding_id, f.target, f.data, f.detail, path,
                                  path.name if path else "", identity, minimized))
        return out

    def corpus(self) -> list[SavedInput]:
        """Every corpus entry (queue/), in queue id order, named as queue/ names it."""
        journal = self._journal()
        try:
            rows = list(journal.iter_corpus())
        finally:
            journal.close()
        files = self._files("queue")
        return [SavedInput("queue", e.queue_id, e.target, e.data, "", files.get(e.queue_id),
                           OutputDir.queue_name(e.queue_id, parent=e.parent, origin=e.origin,
                                                     new_bits=e.new_bits))
                for e in rows]

    def check_target(self, target: str) -> str:
        if target not in self.targets:
            raise CampaignDirError(f"--target: {target!r} is not one of the campaign's targets"
                                   f" ({', '.join(self.targets)})")
        return target


def locate(path: Path) -> tuple[Path, str, int] | None:
    """(OUT, kind, id) for a file in a campaign's crashes/, hangs/ or queue/, else None."""
    path = Path(path).resolve()
    m = _ID.match(path.name)
    kinds = {v: k for k, v in FOLDERS.items()}
    if m and path.parent.name in kinds and (path.parent.parent / CONFIG_SNAPSHOT).is_file():
        return path.parent.parent, kinds[path.parent.name], int(m.group(1))
    return None
