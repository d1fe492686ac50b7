"""The AFL-style output directory: queue/, crashes/, hangs/ files written atomically."""

from __future__ import annotations

import enum
import os
import re
from pathlib import Path

from symfence.protocol.crashid import legacy_sig, legacy_signature

# OUT/minimized/crashes/, OUT/minimized/hangs/: the minimized inputs under their findings' names
# (not inside crashes/: tools and scripts count the files there, AFL-style, a folder flat)
MINIMIZED = "minimized"
UNCONFIRMED = "unconfirmed"  # claims their re-run did not agree with (confirm.py), for the user


class FindingClass(str, enum.Enum):
    """What a saved finding is: the journal's kind (crash/hang), with out-of-memory split off."""

    CRASH = "crash"
    OOM = "oom"  # the target raised MemoryError (e.g. past concolic.options.memory_limit_mb)
    HANG = "hang"


def finding_class(kind: str, detail: str) -> FindingClass:
    if kind == "hang":
        return FindingClass.HANG
    if crash_signature(detail).startswith("MemoryError ") or "ERROR: libFuzzer: out-of-memory" in detail:
        return FindingClass.OOM  # Python's MemoryError (RLIMIT_AS), or libFuzzer's -rss_limit_mb in a fuzz slice
    return FindingClass.CRASH


def crash_signature(detail: str) -> str:
    """The exception line's type plus the innermost traceback line (the dedup key before crash
    identities; now only the out-of-memory test and old journals' names use it)."""
    return legacy_signature(detail)


def _safe(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:limit]


class OutputDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.queue = root / "queue"
        self.crashes = root / "crashes"
        self.hangs = root / "hangs"
        self.details = root / "crash_details"
        self.logs = root / "logs"
        self._queue_str = str(self.queue)
        for d in (self.queue, self.crashes, self.hangs, self.details, self.logs):
            d.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _write(path: Path, data: bytes) -> Path:
        tmp = path.with_name(f".tmp.{path.name}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return path

    def queue_entry(self, queue_id: int, data: bytes, *, parent: int | None, origin: str, new_bits: int) -> Path:
        name = self.queue_name(queue_id, parent=parent, origin=origin, new_bits=new_bits)
        self._write_in(self._queue_str, name, data)
        return self.queue / name

    @staticmethod
    def queue_name(queue_id: int, *, parent: int | None, origin: str, new_bits: int) -> str:
        src = ("seed" if origin == "seed" else "src:none") if parent is None else f"src:{parent:06d}"
        tag = {2: ",+cov", 1: ",+hit"}.get(new_bits, "")
        return f"id:{queue_id:06d},{src},op:{_safe(origin)}{tag}"

    @staticmethod
    def _write_in(folder: str, name: str, data: bytes) -> None:
        """Atomically (temporary file, then rename), with str paths: the writer thread writes
        one of these per corpus entry."""
        tmp = f"{folder}/.tmp.{name}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, f"{folder}/{name}")

    @staticmethod
    def finding_name(kind: str, finding_id: int, *, detail: str, target: str, sig: str | None = None) -> str:
        """`sig`: the crash (or hang) identity's file-name form (protocol/crashid.py); None for a
        crash saved before identities (its old name: the exception type only) or a hang without
        a stack (``timeout``)."""
        if kind != "crash":
            sig = sig or "timeout"
        elif sig is None:
            sig = legacy_sig(detail)
        oom = ",kind:oom" if finding_class(kind, detail) is FindingClass.OOM else ""
        return f"id:{finding_id:06d},sig:{sig}{oom},target:{_safe(target.replace(':', '.'))}"

    def finding(self, kind: str, finding_id: int, data: bytes, *, detail: str, target: str,
                identity: str | None = None, sig: str | None = None) -> Path:
        """`identity`/`sig`: the crash identity's key and file-name form (None: a legacy finding)."""
        folder = self.crashes if kind == "crash" else self.hangs
        name = self.finding_name(kind, finding_id, detail=detail, target=target, sig=sig)
        if detail or identity:
            head = f"identity: {identity}\n" if identity else ""
            (self.details / f"{kind}-{finding_id:06d}.txt").write_text(head + detail)
        return self._write(folder / name, data)

    def unconfirmed(self, number: int, kind: str, data: bytes, *, detail: str, target: str, account: str) -> Path:
        """A claim its re-run did not agree with: the input, and beside it the claim's detail."""
        folder = self.root / UNCONFIRMED
        folder.mkdir(exist_ok=True)
        name = f"id:{number:06d},kind:{kind},target:{_safe(target.replace(':', '.'))}"
        (folder / f"{name}.txt").write_text(account + "\n" + detail)
        return self._write(folder / name, data)

    def minimized_dir(self, kind: str) -> Path:
        return self.root / MINIMIZED / ("crashes" if kind == "crash" else "hangs")

    def minimized(self, kind: str, name: str, data: bytes) -> Path:
        """The minimized input of the finding file `name`, under the same name in minimized/<folder>/."""
        folder = self.minimized_dir(kind)
        folder.mkdir(parents=True, exist_ok=True)
        return self._write(folder / name, data)

    def finding_path(self, kind: str, finding_id: int) -> Path | None:
        """The saved file of a finding (by its id prefix), if there is one."""
        folder = self.crashes if kind == "crash" else self.hangs
        prefix = f"id:{finding_id:06d},"
        return next((p for p in folder.iterdir() if p.name.startswith(prefix) and p.is_file()), None)

    def existing(self, kind: str) -> set[str]:
        folder = {"queue": self.queue, "crash": self.crashes, "hang": self.hangs}[kind]
        return {p.name for p in folder.iterdir() if not p.name.startswith(".")}
