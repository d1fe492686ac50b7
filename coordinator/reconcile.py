"""On resume, reconcile queue/, crashes/ and hangs/ with the journal's durable state.

Files are written only after the journal commit that names them is durable, so normally every
file matches a journal record. A journal can still lose its last commits while their files stay:
a power loss with `journal.synchronous = "normal"`, a deleted or damaged `-wal`, a journal rebuilt
by `symfence recover`. Such files must never be overwritten by, or share an id with, the inputs
found next. Each file is therefore

- kept when the journal holds the same id with the same content;
- re-admitted when it lies beyond the journal and is valid (a queue entry whose parent the
  journal knows and whose input is new; a crash or hang of a configured target that is new):
  it becomes a journal record (with the next free id; the file is renamed if that id differs);
- otherwise moved aside to `OUT/orphaned/<folder>/`, never deleted and never overwritten.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import structlog

from symfence.coordinator.journal import CorpusEntry, FindingKind, Journal, NewEntry, NewFinding
from symfence.coordinator.outputs import OutputDir
from symfence.protocol.ids import work_id_for

log = structlog.get_logger()

ORPHANED = "orphaned"
_ID = re.compile(r"id:(\d{6,})(?:,|$)")
_SRC = re.compile(r"^id:\d+,(?:(seed)|src:(\d+))(?:,|$)")
_OP = re.compile(r",op:([^,]*)")
_TARGET = re.compile(r",target:([^,]*)$")


@dataclass
class ReconcileReport:
    kept: int = 0
    readmitted: int = 0
    moved_aside: list[str] = field(default_factory=list)  # paths relative to OUT

    def as_log(self) -> dict[str, Any]:
        return {"kept": self.kept, "readmitted": self.readmitted, "moved_aside": len(self.moved_aside)}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_at(dir_fd: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _file_id(name: str) -> int | None:
    m = _ID.match(name)
    return int(m.group(1)) if m else None


def _safe(text: str, limit: int = 40) -> str:  # the mangling outputs.py uses in file names
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:limit]


class Reconciler:
    def __init__(self, journal: Journal, out: OutputDir, *, executor: str, options: dict[str, Any],
                 targets: Iterable[str]) -> None:
        self.journal = journal
        self.out = out
        self.executor = executor
        self.options = options
        self.targets = list(targets)
        self.report = ReconcileReport()

    # ------------------------------------------------------------------ moving aside

    def _move_aside(self, path: Path, why: str) -> None:
        folder = self.out.root / ORPHANED / path.parent.name
        folder.mkdir(parents=True, exist_ok=True)
        dest = folder / path.name
        n = 0
        while dest.exists():
            n += 1
            dest = folder / f"{path.name}.{n}"
        os.replace(path, dest)
        rel = str(dest.relative_to(self.out.root))
        self.report.moved_aside.append(rel)
        log.warning("output.moved_aside", path=str(path.relative_to(self.out.root)), to=rel, reason=why)

    # ------------------------------------------------------------------ queue/

    def queue(self) -> list[CorpusEntry]:
        # A resume reads every queue file: by name (str sort, scandir's file type) and with a
        # directory fd, as a 100,000-entry queue/ costs seconds through pathlib.
        durable = {e.queue_id: e.sha256 for e in self.journal.iter_corpus()}
        beyond: list[tuple[int, Path]] = []
        matched: set[int] = set()
        with os.scandir(self.out.queue) as it:
            names = sorted(e.name for e in it if not e.name.startswith(".") and e.is_file())
        dir_fd = os.open(self.out.queue, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in names:
                path = self.out.queue / name
                qid = _file_id(name)
                if qid is None:
                    self._move_aside(path, "not a queue entry name")
                elif qid in durable:
                    if qid not in matched and _sha(_read_at(dir_fd, name)) == durable[qid]:
                        matched.add(qid)
                        self.report.kept += 1
                    else:
                        self._move_aside(path, "its content differs from the journal's entry")
                else:
                    beyond.append((qid, path))
        finally:
            os.close(dir_fd)
        return self._queue_beyond(beyond)

    def _queue_beyond(self, beyond: list[tuple[int, Path]]) -> list[CorpusEntry]:
        """Files with ids beyond the journal: re-admitted when valid, else moved aside."""
        if not beyond:
            return []
        durable = {e.queue_id: e for e in self.journal.iter_corpus()}
        # Two files with one id beyond the journal: the first (by name) is a candidate.
        by_id: dict[int, Path] = {}
        for qid, path in sorted(beyond):
            if qid in by_id:
                self._move_aside(path, "a second file with this queue id")
            else:
                by_id[qid] = path
        readmitted: list[CorpusEntry] = []
        known = dict(durable)
        for qid in sorted(by_id):
            entry = self._readmit_queue(by_id[qid], known)
            if entry is not None:
                known[entry.queue_id] = entry
                readmitted.append(entry)
        return readmitted

    def _readmit_queue(self, path: Path, known: dict[int, CorpusEntry]) -> CorpusEntry | None:
        m = _SRC.match(path.name)
        if m is None:
            self._move_aside(path, "its source cannot be read from its name")
            return None
        data = path.read_bytes()
        sha = _sha(data)
        if m.group(1):  # a seed: its target is known only when there is a single one
            if len(self.targets) != 1:
                self._move_aside(path, "a seed beyond the journal (seeding recreates it)")
                return None
            target, bound, parent = self.targets[0], 0, None
        else:
            parent = int(m.group(2))
            if parent not in known:
                self._move_aside(path, f"its parent {parent} is not in the journal")
                return None
            target, bound = known[parent].target, known[parent].bound
        op = _OP.search(path.name)
        origin = "seed" if parent is None else (op.group(1) if op else self.executor)
        new_bits = 2 if path.name.endswith(",+cov") else 1 if path.name.endswith(",+hit") else 0
        # The child's exact search bound is not in its name; its parent's is a lower bound,
        # so the re-admitted item explores at least what the lost one would have.
        wid = work_id_for(self.executor, target, sha, bound, self.options)
        if self.journal.has_input(target, sha) or self.journal.has_work(wid):
            self._move_aside(path, "its input is already in the journal")
            return None
        (entry,) = self.journal.add_seeds([
            NewEntry(data=data, sha256=sha, work_id=wid, target=target, bound=bound, parent=parent,
                     origin=origin, new_bits=new_bits, found_s=0.0)
        ])
        if f"id:{entry.queue_id:06d}," not in path.name + ",":
            self._move_aside(path, f"re-admitted as queue id {entry.queue_id}")
        self.report.readmitted += 1
        return entry

    # ------------------------------------------------------------------ crashes/, hangs/

    def findings(self) -> None:
        durable: dict[tuple[FindingKind, int], str] = {
            (f.kind, f.finding_id): f.sha256 for f in self.journal.iter_findings()
        }
        for kind, folder in ((FindingKind.CRASH, self.out.crashes), (FindingKind.HANG, self.out.hangs)):
            beyond: list[tuple[int, Path]] = []
            matched: set[int] = set()
            for path in sorted(folder.iterdir()):
                if path.name.startswith(".") or not path.is_file():
                    continue
                fid = _file_id(path.name)
                if fid is None:
                    self._move_aside(path, "not a finding name")
                elif (kind, fid) in durable:
                    if fid not in matched and _sha(path.read_bytes()) == durable[(kind, fid)]:
                        matched.add(fid)
                        self.report.kept += 1
                    else:
                        self._move_aside(path, "its content differs from the journal's finding")
                else:
                    beyond.append((fid, path))
            taken: set[int] = set()
            for fid, path in sorted(beyond):
                if fid in taken:
                    self._move_aside(path, "a second file with this finding id")
                    continue
                taken.add(fid)
                self._readmit_finding(kind, fid, path)

    def _readmit_finding(self, kind: FindingKind, fid: int, path: Path) -> None:
        m = _TARGET.search(path.name)
        mangled = m.group(1) if m else None
        matches = [t for t in self.targets if _safe(t.replace(":", ".")) == mangled]
        detail_path = self.out.details / f"{kind.value}-{fid:06d}.txt"
        if len(matches) != 1:
            self._move_aside(path, "its target is not one of the campaign's")
            if detail_path.exists():
                self._move_aside(detail_path, "detail of a finding moved aside")
            return
        data = path.read_bytes()
        detail = detail_path.read_text(errors="replace") if detail_path.exists() else ""
        recorded = self.journal.add_recovered([
            NewFinding(kind=kind, data=data, sha256=_sha(data), target=matches[0], detail=detail)
        ])
        if not recorded:
            self._move_aside(path, "its input is already a finding")
            if detail_path.exists():
                self._move_aside(detail_path, "detail of a finding moved aside")
            return
        if recorded[0].finding_id != fid:
            self._move_aside(path, f"re-admitted as {kind.value} id {recorded[0].finding_id}")
            if detail_path.exists():
                self._move_aside(detail_path, "detail of a re-admitted finding")
        self.report.readmitted += 1


def reconcile(journal: Journal, out: OutputDir, *, executor: str, options: dict[str, Any],
              targets: Iterable[str]) -> ReconcileReport:
    """Reconcile the output files with the journal; re-admitted records are made durable and
    their files (re)written before this returns."""
    r = Reconciler(journal, out, executor=executor, options=options, targets=targets)
    r.queue()
    r.findings()
    durable = journal.flush()
    for e in durable.entries:
        out.queue_entry(e.queue_id, e.data, parent=e.parent, origin=e.origin, new_bits=e.new_bits)
    for f in durable.findings:
        out.finding(f.kind.value, f.finding_id, f.data, detail=f.detail, target=f.target)
    if r.report.readmitted or r.report.moved_aside:
        log.warning("outputs.reconciled", **r.report.as_log())
    return r.report
