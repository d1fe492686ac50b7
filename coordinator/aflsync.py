"""AFL++ side by side: import new entries from an AFL++ sync directory's ``*/queue`` as seeds,
export our corpus as an AFL++ sync instance, and launch ``afl-fuzz -S`` instances on request.

Import is incremental: each instance's next id to read is derived from the journal's corpus
(imported entries have origin ``sync:<instance>:<id>``, or ``sync:<instance>@<n>:<id>`` after
afl-fuzz was restarted on its directory and renumbered its queue), so a ``--resume`` continues
where the journal's durable state ends, with no cursor that could disagree with it. An entry is
read only once afl-fuzz has finished writing it (see SyncImporter). Export writes
``<sync_dir>/<instance>/queue/id:NNNNNN,...`` with contiguous ids (AFL++ looks for exactly
``id:<next>`` when it syncs), each file written under ``.tmp/`` and renamed into place; every
name carries our queue id (``qid:``) so a restart continues from the directory itself.
Entries that came from AFL++ are not exported back.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import structlog

from symfence.protocol.execpath import runnable

log = structlog.get_logger()

_ID = re.compile(r"^id:(\d{6,})")
_QID = re.compile(r",qid:(\d+)")
_ORIGIN = re.compile(r"^sync:(.+):(\d+)$")
AFL_ENV = {
    "AFL_SKIP_CPUFREQ": "1",  # shared machines: no performance governor required
    "AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES": "1",  # core_pattern may pipe to a handler
    "AFL_NO_UI": "1",
    "AFL_NO_AFFINITY": "1",  # do not pin: the MPI ranks share the cores
    "AFL_IMPORT_FIRST": "1",  # import other instances (symfence) at start, before fuzzing
    "AFL_SYNC_TIME": "1",  # then sync every minute (AFL++'s default is 30)
    # started again on its directory (symfence --resume): keep its queue (re-added from id 0)
    # instead of deleting it, or refusing to start after 25 minutes of earlier fuzzing
    "AFL_AUTORESUME": "1",
}


STATE_PREFIX = "afl_sync_"  # the importer's counters in the journal
_INT63 = (1 << 63) - 1


SYNC_PREFIX = "sync:"  # the origin of every corpus entry imported from AFL++


def sync_origin(instance: str, entry_id: int) -> str:
    return f"{SYNC_PREFIX}{instance}:{entry_id:06d}"


@dataclass(frozen=True)
class Imported:
    instance: str  # the session tag: ``<instance>`` or ``<instance>@<n>``
    entry_id: int
    data: bytes


class SkipReason(Enum):
    """Why an AFL++ queue entry was passed over for good (logged as ``afl.entry_skipped``, but OURS)."""

    OURS = "ours"            # AFL++'s copy of one of our own entries (``,sync:<own>,`` in its name)
    EMPTY = "empty"          # settled at zero bytes
    TOO_LARGE = "too_large"  # settled above limits.max_candidate_bytes
    VANISHED = "vanished"    # missing while later ids exist, for longer than gap_timeout_s


@dataclass(frozen=True)
class _Stamp:
    """What a queue file looked like when read: a rewrite or a write in progress changes it."""

    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> _Stamp:
        return cls(st.st_ino, st.st_size, st.st_mtime_ns)


def _dir_id(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev & _INT63, st.st_ino & _INT63  # kept as journal counters (SQLite integers)


class SyncImporter:
    """Reads every other instance's ``id:`` files in id order, each once, and only once written.

    afl-fuzz writes a queue entry in place (open, write, close) and rewrites it when it trims the
    entry (unlink, create, write), so a poll can meet an entry that is missing, empty or partly
    written. An entry is read only when it is *settled*: the same file (inode, size, mtime) for at
    least ``settle_s`` (by its mtime, or across our own polls), and unchanged while it was read. The cursor only moves over a contiguous run of settled entries: an entry that is not
    settled yet, or an id missing while later ids exist, stops that instance until a later poll
    (an id missing for longer than ``gap_timeout_s`` is skipped as vanished).

    afl-fuzz renumbers its queue whenever it is started again on its directory (AFL_AUTORESUME
    re-adds the old entries from id 0, in its own order; without it the old queue is deleted), and
    each start replaces the ``queue`` directory. A replaced directory starts a new *session* of that
    instance: its origins read ``sync:<instance>@<n>:<id>``, its cursor starts at 0, and entries
    already in the corpus are dropped by content (the journal keys the corpus by sha256). Sessions
    and directories are kept with the journal's counters (state/restore), so this holds across a
    --resume too; a directory deleted and made again can reuse its inode number, which is missed
    (afl-fuzz with AFL_AUTORESUME renames the old one first, so its new directory never does).
    """

    def __init__(self, sync_dir: Path, own: str, max_bytes: int = 1 << 20, *, settle_s: float = 1.0,
                 gap_timeout_s: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time):
        self.sync_dir = sync_dir
        self.own = own
        self.max_bytes = max_bytes
        self.settle_s = settle_s
        self.gap_timeout_s = gap_timeout_s
        self.clock, self.wall = clock, wall
        self.next_id: dict[str, int] = {}   # session tag -> next id to read
        self.session: dict[str, int] = {}   # instance -> its current session (0: the first)
        self.queue_dir_id: dict[str, tuple[int, int]] = {}  # instance -> (st_dev, st_ino) of queue/
        self.skipped: Counter[SkipReason] = Counter()
        self._seen: dict[tuple[str, int], tuple[_Stamp, float]] = {}  # (tag, id) -> stamp, since when
        self._gap_since: dict[tuple[str, int], float] = {}
        self._refused: set[str] = set()

    def tag(self, instance: str) -> str:
        n = self.session.get(instance, 0)
        return instance if n == 0 else f"{instance}@{n}"

    def remember(self, origins: Iterable[str]) -> None:
        """Rebuild the cursors (and each instance's latest session) from the journal's origins."""
        for origin in origins:
            m = _ORIGIN.match(origin)
            if m:
                tag, entry = m.group(1), int(m.group(2))
                inst, _, n = tag.partition("@")
                self.session[inst] = max(self.session.get(inst, 0), int(n) if n.isdigit() else 0)
                self.next_id[tag] = max(self.next_id.get(tag, 0), entry + 1)

    def state(self) -> dict[str, int]:
        """Each instance's session and queue directory, for the journal's counters: a --resume
        then also sees an afl-fuzz restarted while symfence was not running, and a session that
        imported nothing new (all already in the corpus) is not taken for the one before it."""
        out = {f"{STATE_PREFIX}session:{inst}": n for inst, n in self.session.items()}
        for inst, (dev, ino) in self.queue_dir_id.items():
            out[f"{STATE_PREFIX}queue_dev:{inst}"], out[f"{STATE_PREFIX}queue_ino:{inst}"] = dev, ino
        return out

    def restore(self, counters: Mapping[str, int]) -> None:
        """The inverse of state() (before remember(): the origins can only raise a session)."""
        dirs: dict[str, dict[str, int]] = {}
        for key, value in counters.items():
            kind, sep, inst = key.removeprefix(STATE_PREFIX).partition(":")
            if not key.startswith(STATE_PREFIX) or not sep:
                continue
            if kind == "session":
                self.session[inst] = max(self.session.get(inst, 0), int(value))
            elif kind in ("queue_dev", "queue_ino"):
                dirs.setdefault(inst, {})[kind] = int(value)
        for inst, d in dirs.items():
            if len(d) == 2:
                self.queue_dir_id[inst] = (d["queue_dev"], d["queue_ino"])

    def watch(self, instance: str) -> None:
        """Note an instance's current queue directory, so that its replacement is seen as a new
        session (called before afl-fuzz is started again on an existing directory)."""
        try:
            st = (self.sync_dir / instance / "queue").stat()
        except OSError:
            return
        self.queue_dir_id[instance] = _dir_id(st)

    def poll(self) -> list[Imported]:
        found: list[Imported] = []
        if not self.sync_dir.is_dir():
            return found
        for inst_dir in sorted(self.sync_dir.iterdir()):
            inst = inst_dir.name
            if inst == self.own or inst.startswith("."):
                continue
            if "@" in inst:  # '@' marks a session in our origins: such a name would be ambiguous
                if inst not in self._refused:
                    self._refused.add(inst)
                    log.warning("afl.instance_refused", instance=inst, reason="'@' in the instance name")
                continue
            try:
                st = (inst_dir / "queue").stat()
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                continue
            ident = _dir_id(st)
            if self.queue_dir_id.setdefault(inst, ident) != ident:
                self.queue_dir_id[inst] = ident
                self.session[inst] = self.session.get(inst, 0) + 1
                log.info("afl.session_changed", instance=inst, session=self.session[inst])
            found.extend(self._poll_instance(inst, inst_dir / "queue"))
        return found

    def _poll_instance(self, inst: str, queue: Path) -> list[Imported]:
        tag = self.tag(inst)
        start = self.next_id.get(tag, 0)
        files: dict[int, Path] = {}
        for path in queue.iterdir():
            m = _ID.match(path.name)
            if m and int(m.group(1)) >= start:
                files.setdefault(int(m.group(1)), path)
        found: list[Imported] = []
        eid, last = start, max(files, default=start - 1)
        while eid <= last:
            f = files.get(eid)
            if f is not None and f",sync:{self.own}," in f.name + ",":
                outcome: bytes | SkipReason | None = SkipReason.OURS
            elif f is not None:
                outcome = self._settled(tag, eid, f)
            elif self.clock() - self._gap_since.setdefault((tag, eid), self.clock()) >= self.gap_timeout_s:
                outcome = SkipReason.VANISHED
            else:
                outcome = None
            if outcome is None:
                break  # not written yet (or being rewritten): this instance resumes here next poll
            self._seen.pop((tag, eid), None)
            self._gap_since.pop((tag, eid), None)
            if isinstance(outcome, SkipReason):
                self.skipped[outcome] += 1
                if outcome is not SkipReason.OURS:
                    log.info("afl.entry_skipped", instance=tag, entry_id=eid, reason=outcome.value)
            else:
                found.append(Imported(tag, eid, outcome))
            eid += 1
        self.next_id[tag] = eid
        return found

    def _settled(self, tag: str, eid: int, f: Path) -> bytes | SkipReason | None:
        """The entry's bytes (or why it is skipped) once settled; None while it may still change."""
        try:
            fd = os.open(f, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None  # unlinked since the listing (a trim rewriting it): look again next poll
        try:
            before = _Stamp.of(os.fstat(fd))
            data = os.read(fd, self.max_bytes + 1) if before.size <= self.max_bytes else b""
            after = _Stamp.of(os.fstat(fd))
        except OSError:
            return None
        finally:
            os.close(fd)
        if before != after or (after.size <= self.max_bytes and len(data) != after.size):
            return None  # written to while we read it
        seen = self._seen.get((tag, eid))
        if seen is None or seen[0] != after:
            seen = self._seen[(tag, eid)] = (after, self.clock())
        # unchanged for settle_s: by its mtime, or (a skewed file-system clock) by our own polls
        age = max(self.wall() - after.mtime_ns / 1e9, self.clock() - seen[1])
        if age < self.settle_s:
            return None
        if after.size == 0:  # created, not written yet; skipped only once it stays empty as long as a gap
            return SkipReason.EMPTY if age >= self.gap_timeout_s else None
        if after.size > self.max_bytes:
            return SkipReason.TOO_LARGE
        return data


class SyncExporter:
    """Our corpus as an AFL++ sync instance (``<sync_dir>/<instance>/queue``)."""

    def __init__(self, sync_dir: Path, instance: str):
        self.root = sync_dir / instance
        self.queue = self.root / "queue"
        self.tmp = self.root / ".tmp"
        self.queue.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(exist_ok=True)
        self.next_id = 0
        self.last_qid = -1
        self.eid_of_qid: dict[int, int] = {}
        for f in self.queue.iterdir():
            m, q = _ID.match(f.name), _QID.search(f.name)
            if m:
                eid = int(m.group(1))
                self.next_id = max(self.next_id, eid + 1)
                if q:
                    self.eid_of_qid[int(q.group(1))] = eid
                    self.last_qid = max(self.last_qid, int(q.group(1)))

    def export(self, entries: Iterable[Any]) -> int:
        """Export corpus entries (journal CorpusEntry) newer than the last exported one."""
        written = 0
        for e in sorted(entries, key=lambda e: e.queue_id):
            if e.queue_id <= self.last_qid:
                continue
            self.last_qid = e.queue_id
            if e.origin.startswith("sync:"):
                continue
            eid = self.next_id
            if e.parent is None:
                name = f"id:{eid:06d},orig:seed,qid:{e.queue_id:06d}"
            elif e.parent in self.eid_of_qid:
                name = f"id:{eid:06d},src:{self.eid_of_qid[e.parent]:06d},op:symfence,qid:{e.queue_id:06d}"
            else:
                name = f"id:{eid:06d},op:symfence,qid:{e.queue_id:06d}"
            tmp = self.tmp / name
            tmp.write_bytes(e.data)
            os.replace(tmp, self.queue / name)
            self.eid_of_qid[e.queue_id] = eid
            self.next_id += 1
            written += 1
        return written


class AflFleet:
    """``afl-fuzz -S`` instances started (and stopped) by the coordinator."""

    def __init__(self, afl_fuzz: str, binary: str, sync_dir: Path, input_dir: Path, log_dir: Path,
                 count: int, *, input_mode: str, timeout_ms: int, extra: list[str], prefix: str):
        self.argv_of = lambda i: [afl_fuzz, "-S", f"{prefix}{i}", "-i", str(input_dir), "-o", str(sync_dir),
                                  "-t", str(timeout_ms), *extra, "--", runnable(binary),
                                  *(["@@"] if input_mode == "file" else [])]
        self.count = count
        self.names = [f"{prefix}{i}" for i in range(count)]
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        env = {**os.environ, **AFL_ENV}
        env = {k: v for k, v in env.items() if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "OMPI_"))}
        for i in range(self.count):
            argv = self.argv_of(i)
            with open(self.log_dir / f"afl-fuzz-{i}.log", "ab") as out:  # appended across --resume
                self.procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                                   stderr=subprocess.STDOUT, start_new_session=True))
            log.info("afl.launched", instance=argv[2], pid=self.procs[-1].pid)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.info("afl.stopped", pid=p.pid, code=p.returncode)


class AflSide:
    """What the campaign calls: start, import on a timer, export on flush, stop."""

    def __init__(self, cfg: Any, out_root: Path, log_dir: Path, queue_dir: Path):
        s = cfg.section("afl")
        self.sync_dir = Path(s["sync_dir"])
        self.sync_dir.mkdir(parents=True, exist_ok=True)
        self.instance = s["instance"]
        self.interval_s = s["import_interval_s"]
        self.target = s["target"] or cfg["campaign.targets"][0]
        self.importer = SyncImporter(self.sync_dir, self.instance, cfg["limits.max_candidate_bytes"])
        self.exporter = SyncExporter(self.sync_dir, self.instance) if s["export"] else None
        self.next_import = 0.0
        self.imported = 0
        self.fleet: AflFleet | None = None
        if s["launch"]:
            from symfence.protocol.options import NativeOptions
            opts = NativeOptions.from_mapping(cfg["native.options"])
            binary = s["launch_binary"] or opts.afl_path(self.target)
            afl_fuzz = shutil.which("afl-fuzz")
            if afl_fuzz is None:
                raise FileNotFoundError("afl.launch: afl-fuzz is not installed (apt-get install afl++)")
            self.seed_dir = out_root / "afl_seeds"  # the campaign's own seeds; the rest comes by sync
            self.fleet = AflFleet(afl_fuzz, binary, self.sync_dir, self.seed_dir, log_dir, s["launch"],
                                  input_mode=opts.input, timeout_ms=max(20, int(opts.exec_timeout_s * 1000)),
                                  extra=list(s["launch_args"]), prefix=f"{self.instance}-afl-")

    @classmethod
    def from_config(cls, cfg: Any, out: Any) -> AflSide | None:
        if not cfg["afl.sync_dir"]:
            return None
        return cls(cfg, out.root, out.logs, out.queue)

    def start(self, journal: Any) -> None:
        corpus = list(journal.iter_corpus())
        self.importer.remember(e.origin for e in corpus)
        if self.exporter is not None:
            self.exporter.export(corpus)
        if self.fleet is not None:
            self.seed_dir.mkdir(exist_ok=True)
            for e in corpus:
                if e.origin == "seed" and e.target == self.target:
                    (self.seed_dir / f"seed-{e.queue_id:06d}").write_bytes(e.data)
            for name in self.fleet.names:  # a queue left by an earlier run is renumbered: a new session
                self.importer.watch(name)
            self.fleet.start()

    def counters(self) -> dict[str, int]:
        """What the journal keeps for the next --resume (with the campaign's counters)."""
        return self.importer.state()

    def restore(self, counters: Mapping[str, int]) -> None:
        """On --resume, before the campaign's first flush replaces the saved counters."""
        self.importer.restore(counters)

    def due(self, now: float) -> bool:
        if now < self.next_import:
            return False
        self.next_import = now + self.interval_s
        return True

    def poll(self) -> list[Imported]:
        found = self.importer.poll()
        self.imported += len(found)
        if found:
            log.info("afl.imported", entries=len(found), instances=sorted({f.instance for f in found}))
        return found

    def export(self, entries: Iterable[Any]) -> None:
        if self.exporter is not None:
            self.exporter.export(entries)

    def stop(self) -> None:
        if self.fleet is not None:
            self.fleet.stop()
