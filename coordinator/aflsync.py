"""AFL++ side by side: import new entries from an AFL++ sync directory's ``*/queue`` as seeds,
export our corpus as an AFL++ sync instance, and launch ``afl-fuzz -S`` instances on request.

Import is incremental: each instance's next id to read is derived from the journal's corpus
(imported entries have origin ``sync:<instance>:<id>``), so a ``--resume`` continues where the
journal's durable state ends, with no cursor that could disagree with it. Export writes
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
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import structlog

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
}


def sync_origin(instance: str, entry_id: int) -> str:
    return f"sync:{instance}:{entry_id:06d}"


@dataclass(frozen=True)
class Imported:
    instance: str
    entry_id: int
    data: bytes


class SyncImporter:
    """Reads new ``id:`` files from every other instance's queue, in id order."""

    def __init__(self, sync_dir: Path, own: str, max_bytes: int = 1 << 20):
        self.sync_dir = sync_dir
        self.own = own
        self.max_bytes = max_bytes
        self.next_id: dict[str, int] = {}

    def remember(self, origins: Iterable[str]) -> None:
        """Rebuild the cursors from the journal's corpus origins."""
        for origin in origins:
            m = _ORIGIN.match(origin)
            if m:
                inst, entry = m.group(1), int(m.group(2))
                self.next_id[inst] = max(self.next_id.get(inst, 0), entry + 1)

    def poll(self) -> list[Imported]:
        found: list[Imported] = []
        if not self.sync_dir.is_dir():
            return found
        for inst_dir in sorted(self.sync_dir.iterdir()):
            inst = inst_dir.name
            if inst == self.own or inst.startswith(".") or not (inst_dir / "queue").is_dir():
                continue
            start = self.next_id.get(inst, 0)
            entries = []
            for f in (inst_dir / "queue").iterdir():
                m = _ID.match(f.name)
                if m and int(m.group(1)) >= start and f.is_file():
                    entries.append((int(m.group(1)), f))
            for entry_id, f in sorted(entries):
                self.next_id[inst] = entry_id + 1
                if f",sync:{self.own}," in f.name + ",":
                    continue  # AFL++'s copy of one of our own entries
                try:
                    data = f.read_bytes()
                except OSError:
                    continue
                if 0 < len(data) <= self.max_bytes:
                    found.append(Imported(inst, entry_id, data))
        return found


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
                                  "-t", str(timeout_ms), *extra, "--", binary,
                                  *(["@@"] if input_mode == "file" else [])]
        self.count = count
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        env = {**os.environ, **AFL_ENV}
        env = {k: v for k, v in env.items() if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "OMPI_"))}
        for i in range(self.count):
            argv = self.argv_of(i)
            with open(self.log_dir / f"afl-fuzz-{i}.log", "wb") as out:
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
            from symfence.worker.native.base import NativeOptions
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
            self.fleet.start()

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
