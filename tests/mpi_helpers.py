"""Launch real multi-rank campaigns under mpiexec from tests, with a hard timeout."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
# The Open MPI venv (ULFM tests): `make test` creates it beside the main one.
OMPI_BIN = ROOT / ".venv-ompi" / "bin"
OMPI_MPIEXEC = str(OMPI_BIN / "mpiexec") if (OMPI_BIN / "mpiexec").exists() else None
OMPI_PYTHON = str(OMPI_BIN / "python")
# For a run after which a test compares every queue/ file with the journal: the end writes every
# owed file however long it takes (by default it writes them for 0.5 s and leaves the rest to the
# next --resume, so on a loaded machine such a comparison failed now and then).
ALL_OWED_FILES = {"SYMFENCE_OWED_FILES_S": "inf"}


def read_committed(out: Path) -> int:
    """The `committed` counter of a running campaign's fuzzer_stats (0 before the first write)."""
    return read_stat(out, "committed")


def read_stat(out: Path, key: str) -> int:
    """One integer of a running campaign's fuzzer_stats (0 before its first write)."""
    try:
        from symfence.coordinator.stats import read_stats

        return int(read_stats(out / "fuzzer_stats").get(key, 0))
    except (OSError, ValueError):
        return 0


def toml_dump(cfg: dict[str, dict[str, Any]]) -> str:
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        raise TypeError(v)

    out = []
    for section, table in cfg.items():
        scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
        out.append(f"[{section}]")
        out += [f"{k} = {value(v)}" for k, v in scalars.items()]
        for k, v in table.items():
            if isinstance(v, dict):
                out.append(f"[{section}.{k}]")
                out += [f"{kk} = {value(vv)}" for kk, vv in v.items()]
    return "\n".join(out) + "\n"


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    out: Path

    def explain(self, chars: int = 3000) -> str:
        """Both tails: mpiexec reports a rank killed by a signal on stdout, the ranks log on stderr."""
        return f"exit {self.code}\nstdout:\n{self.stdout[-chars:]}\nstderr:\n{self.stderr[-chars:]}"

    def stats(self) -> dict[str, str]:
        from symfence.coordinator.stats import read_stats

        return read_stats(self.out / "fuzzer_stats")

    def events(self, log: str = "coordinator.jsonl") -> list[dict[str, Any]]:
        path = self.out / "logs" / log
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def worker_events(self) -> list[dict[str, Any]]:
        return [e for p in sorted((self.out / "logs").glob("worker-*.jsonl")) for e in self.events(p.name)]


def run_campaign(tmp_path: Path, cfg: dict[str, dict[str, Any]], *, ranks: int, timeout_s: float = 120,
                 extra_args: list[str] | None = None, out: Path | None = None,
                 env: dict[str, str] | None = None, mpiexec_args: list[str] | None = None,
                 mpiexec: str | None = None, python: str | None = None,
                 on_start: Callable[[subprocess.Popen], None] | None = None, no_status: bool = True) -> Run:
    out = out or tmp_path / "out"
    config = tmp_path / "campaign.toml"
    config.write_text(toml_dump(cfg))
    cmd = [mpiexec or MPIEXEC, *(mpiexec_args or []), "-n", str(ranks), python or sys.executable,
           "-m", "symfence.coordinator", "--config", str(config), "--out", str(out),
           *(["--no-status"] if no_status else []), *(extra_args or [])]
    done = run_job(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                   timeout_s=timeout_s, on_start=on_start, out=out)
    return Run(done.returncode, done.stdout, done.stderr, out)


def run_job(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float,
            on_start: Callable[[subprocess.Popen], None] | None = None,
            out: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a process group of its own (so ``stop_when`` can Ctrl-C all of it); past
    ``timeout_s`` the whole group is killed and the test fails with both output tails. ``out``,
    the campaign's output folder, lets ``stop_when`` see that the campaign is already ending."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    proc.campaign_out = out  # type: ignore[attr-defined]  # read by stop_when's watcher ...
    proc.log_start = _log_size(out)  # type: ignore[attr-defined]  # ... from here: a resumed run's log goes on
    if on_start is not None:
        on_start(proc)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise AssertionError(f"job hung (> {timeout_s} s)\n"
                             f"stdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}") from None
    if (error := getattr(proc, "watch_error", None)) is not None:
        raise AssertionError(f"the stop condition raised {type(error).__name__}: {error}") from error
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def crash_files(out: Path, name: str) -> list[Path]:
    """The crash files of a campaign whose name contains ``name`` (none before crashes/ exists)."""
    folder = out / "crashes"
    return [p for p in folder.glob("*") if name in p.name] if folder.is_dir() else []


def stop_when(done: Callable[[], bool], cap_s: float | None = None) -> Callable[[subprocess.Popen], None]:
    """A ``run_campaign`` on_start hook: Ctrl-C (SIGINT to the job's process group: rank 0 drains,
    writes every output and its summary, exit 0) as soon as ``done()`` holds, or after ``cap_s``.

    So a campaign waits for the event it is there for (a finding, a count, a state), however
    loaded the machine, and no longer. ``done`` may read files being written: an OSError or
    ValueError it raises counts as "not yet"; any other exception stops the job at once and
    fails the test (``run_job``), instead of leaving the campaign to run to its cap."""

    def watch(proc: subprocess.Popen) -> None:
        deadline = None if cap_s is None else time.monotonic() + cap_s
        while proc.poll() is None and (deadline is None or time.monotonic() < deadline):
            try:
                if done():
                    break
            except (OSError, ValueError):
                pass
            except Exception as exc:  # noqa: BLE001 - a broken stop condition: the test's bug
                proc.watch_error = exc  # type: ignore[attr-defined]  # run_job raises it
                break
            time.sleep(0.2)
        ending = _ending(getattr(proc, "campaign_out", None), getattr(proc, "log_start", 0))
        if proc.poll() is None and not ending:
            os.killpg(proc.pid, signal.SIGINT)

    def on_start(proc: subprocess.Popen) -> None:
        threading.Thread(target=watch, args=(proc,), daemon=True).start()

    return on_start


def _log_size(out: Path | None) -> int:
    try:
        return 0 if out is None else (out / "logs" / "coordinator.jsonl").stat().st_size
    except OSError:
        return 0


def _ending(out: Path | None, start: int) -> bool:
    """Whether this run of the campaign in ``out`` (its log from byte ``start``: a resumed
    campaign's log holds the runs before) has logged that it stops: it ends on its own, no Ctrl-C.

    A Ctrl-C then races the job's end: Hydra's mpiexec, forwarding the signal to ranks that have
    just exited, fails with exit 255 ("unable to send signal downstream") although every rank
    exited 0 (CI saw it when a native campaign ran out of work as its last finding was saved)."""
    if out is None:
        return False
    try:
        with open(out / "logs" / "coordinator.jsonl", "rb") as fh:
            fh.seek(start)
            return b'"campaign.stopping"' in fh.read()
    except OSError:
        return False


def stop_when_crash(out: Path, *names: str) -> Callable[[subprocess.Popen], None]:
    """``stop_when`` a crash file naming any of ``names`` exists, so a test costs seconds, not the budget."""
    return stop_when(lambda: any(crash_files(out, name) for name in names))


def logged(out: Path, event: str, log: str = "coordinator.jsonl") -> list[dict[str, Any]]:
    """The events named ``event`` in a running (or finished) campaign's log, so far."""
    path = out / "logs" / log
    if not path.exists():
        return []
    complete = path.read_text().split("\n")[:-1]  # a line being written has no newline yet
    return [e for e in map(json.loads, filter(None, complete)) if e.get("event") == event]


def synthetic_cfg(**sections: dict[str, Any]) -> dict[str, dict[str, Any]]:
    cfg: dict[str, dict[str, Any]] = {
        "campaign": {"executor": "synthetic", "duration_s": 60},
        "dispatch": {"depth": 2, "drain_timeout_s": 10, "stop_timeout_s": 10},
        "workers": {"heartbeat_s": 0.2, "lost_after_s": 30},
        "synthetic": {"seeds": 200, "task_ms": 1.0},
        "stats": {"interval_s": 0.2},
    }
    for name, table in sections.items():
        cfg.setdefault(name, {}).update(table)
    return cfg
