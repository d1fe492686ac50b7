"""Every worker's host checked before work starts, and what workers report from their hosts.

Rank 0 lists the files its workers will run (`manifest`: the targets' Python sources, or the
native binaries and their AFL/SymCC builds) with their sha256 and sends them in each SETUP; each
worker hashes its own copies (worker/hostcheck.py) and answers with a CHECKED: its host, where
its log lives (a local scratch folder with `workers.scratch_dir`), and the first file that is
missing or differs. The campaign starts only once every worker answered; a mismatch stops it
before anything is dispatched, with one line naming host and file (exit status 2).
Seeds are not checked: rank 0 reads them and every input travels in its WORK, with its sha256.

Worker events that matter (warnings and errors: refused frames, bad coverage deltas, executor
trouble) come to rank 0 as CONTROL `log` frames (rate-limited and size-bounded by the worker,
worker/logforward.py) and are written to rank 0's `logs/coordinator.jsonl` as `worker.log`, so a
campaign without a shared filesystem loses none of them. Task errors and findings already come
in the RESULTs.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any, Mapping

import structlog

from symfence.coordinator.config import PYTHON_EXECUTORS, Config
from symfence.coordinator.engines import TargetKind, target_of
from symfence.protocol.ids import Rank

log = structlog.get_logger()
MAX_PACKAGE_FILES = 2000  # a target package's .py files hashed at most (a larger tree: its own file only)
MAX_REMOTE_LOGS = 10000  # worker.log lines written per rank and run; beyond, only counted


def sha256_file(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _module_files(module: str, roots: list[Path]) -> list[Path]:
    """The source files a worker imports for `module`: its top-level package's .py files (or its one
    file), found the way a worker's child finds it (working directory, PYTHONPATH, sys.path)."""
    parts = module.split(".")
    for root in roots:
        top = root / parts[0]
        if top.is_dir() and (top / "__init__.py").is_file():
            files = sorted(p for p in top.rglob("*.py") if "__pycache__" not in p.parts)
            if len(files) <= MAX_PACKAGE_FILES:
                return files
            leaf = root.joinpath(*parts)
            return [p for p in (leaf.with_suffix(".py"), leaf / "__init__.py") if p.is_file()][:1]
        if top.with_suffix(".py").is_file():
            return [top.with_suffix(".py")]
    return []  # the standard library or an installed package: the same Python on every host


def manifest(cfg: Config) -> dict[str, str]:
    """path -> sha256 of every file the workers will run."""
    paths: list[Path] = []
    executor = cfg["campaign.executor"]
    if executor in PYTHON_EXECUTORS:
        roots = [Path.cwd()] + [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        roots += [Path(p) for p in sys.path[1:] if p and "site-packages" not in p and "lib/python" not in p]
        for spec in cfg["campaign.targets"]:
            paths += _module_files(spec.partition(":")[0], roots)
        for module in cfg["concolic.instrument"]:
            paths += _module_files(module, roots)
    elif target_of(executor) is TargetKind.NATIVE:
        from symfence.protocol.options import NativeOptions

        opts = NativeOptions.from_mapping(cfg["native.options"])
        for target in cfg["campaign.targets"]:
            paths.append(Path(target))
            if opts.oracle != "engine":
                paths.append(Path(opts.afl_path(target)))
            if opts.engine == "symcc":
                argv = opts.symcc_argv(target)
                if argv and Path(argv[0]).is_file():
                    paths.append(Path(argv[0]))
    return {str(p.resolve()): sha256_file(p) for p in dict.fromkeys(paths) if p.is_file()}


class HostChecks:
    """The CHECKED answers and the workers' hosts, and their forwarded log events."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = dict(files)
        self.order = sorted(self.files)  # a CHECKED names a bad file by its 1-based index in this order
        self.hosts: dict[Rank, str] = {}
        self.checked: dict[Rank, dict[str, Any]] = {}
        self.problem: str | None = None  # the first mismatch, as one line
        self.remote_logs: dict[Rank, int] = {}

    def on_checked(self, rank: Rank, info: Mapping[str, Any]) -> None:
        if rank in self.checked:
            return
        self.checked[rank] = dict(info)
        host = str(info.get("host", "")) or self.hosts.get(rank, "?")
        self.hosts[rank] = host
        log.info(
            "worker.checked",
            worker=rank,
            host=host,
            files=info.get("files_checked", 0),
            log_path=info.get("log_path"),
        )
        bad = info.get("bad_file", 0)
        if bad and self.problem is None:
            path = self.order[bad - 1] if 0 < bad <= len(self.order) else f"file #{bad}"
            why = str(info.get("why", "differs"))
            ours = self.files.get(path, "?")[:12]
            detail = "is missing" if why == "missing" else f"differs from rank 0's (sha256 {ours}...)"
            self.problem = f"host {host} (rank {rank}): {path} {detail}"
            log.error("worker.host_mismatch", worker=rank, host=host, path=path, why=why)

    def pending(self, alive: set[Rank]) -> set[Rank]:
        return alive - set(self.checked)

    def on_log(self, rank: Rank, info: Mapping[str, Any]) -> None:
        n = self.remote_logs.get(rank, 0) + 1
        self.remote_logs[rank] = n
        if n > MAX_REMOTE_LOGS:
            return
        fields = {k: v for k, v in info.items() if k not in ("event", "level")}
        emit = log.error if info.get("level") in ("error", "critical") else log.warning
        emit(
            "worker.log",
            worker=rank,
            host=self.hosts.get(rank),
            worker_event=str(info.get("event", "")),
            fields=fields,
        )
