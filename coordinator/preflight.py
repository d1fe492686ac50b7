"""Checks before the first dispatch: output directory, seeds, targets, and what --resume would change.

Every check raises ``PreflightError`` with one line naming the key (or target) at fault, so
``symfence run`` can refuse before ``mpiexec`` starts and rank 0 can refuse before it seeds
anything (when launched by ``mpiexec`` directly). Targets of the Python executors are imported
in a fresh process that sees the working directory and ``sys.path`` a worker's child will see
(``python -m symfence.worker.concolic.check``): a missing module, a syntax error, a missing
dependency or a missing function is reported here, never as one task error per input.

The effective config of a campaign is saved as ``campaign.json`` in its output directory; a
``--resume`` compares against it: run-time settings (budget, depth, deadlines, stats, faults)
simply apply, new targets and new seed files are added, and a change that would orphan the
journal's work (another executor, other executor options, a removed target) is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symfence.coordinator import interrupt
from symfence.coordinator.config import OPTION_KEYS, PYTHON_EXECUTORS, Config, executor_options
from symfence.coordinator.engines import MODES, TargetKind, target_of

CONFIG_SNAPSHOT = "campaign.json"
# `symfence run` sets this to the digest of the targets it has imported successfully, so rank 0
# does not import them a second time when it was launched by `symfence run`.
CHECKED_ENV = "SYMFENCE_TARGETS_CHECKED"
TARGET_IMPORT_TIMEOUT_S = 120.0


class PreflightError(Exception):
    """Why the campaign cannot start, as one line that names the key or target."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True)
class ResumeChanges:
    """What a --resume applies relative to the saved config (all empty: nothing changed)."""

    added_targets: tuple[str, ...] = ()
    changed_keys: tuple[str, ...] = ()  # run-time settings that simply take effect


# ---------------------------------------------------------------------------------- paths


def check_out(out: Path) -> None:
    """--out must be a directory (or creatable as one) that this process can write."""
    out = Path(os.path.abspath(out))
    if out.exists() and not out.is_dir():
        raise PreflightError("--out", f"{out} is a file, not a directory")
    existing = out
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise PreflightError("--out", f"{out} lies under {existing}, which is a file")
    try:
        fd, probe = tempfile.mkstemp(prefix=".symfence-probe-", dir=existing)
    except OSError as exc:
        raise PreflightError("--out", f"{existing} is not writable ({exc.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def check_seeds(cfg: Config) -> None:
    """campaign.seeds, when set, must be a folder holding at least one file."""
    folder = cfg["campaign.seeds"]
    if not folder:
        return
    path = Path(folder)
    if not path.exists():
        raise PreflightError("campaign.seeds", f"{folder} does not exist (relative paths are from the working directory)")
    if not path.is_dir():
        raise PreflightError("campaign.seeds", f"{folder} is not a directory of seed files")
    try:
        has_file = any(p.is_file() for p in path.iterdir())
    except OSError as exc:
        raise PreflightError("campaign.seeds", f"cannot read {folder}: {exc.strerror}") from None
    if not has_file:
        raise PreflightError("campaign.seeds", f"{folder} holds no seed files (it is empty)")


# ---------------------------------------------------------------------------------- targets


def targets_digest(cfg: Config) -> str:
    text = json.dumps([os.getcwd(), sys.executable, cfg["campaign.targets"]])
    return hashlib.sha256(text.encode()).hexdigest()


def check_dictionary(cfg: Config) -> None:
    """``fuzz.dict``: a readable libFuzzer/AFL dictionary."""
    if not cfg["fuzz.dict"]:
        return
    from symfence.coordinator.fuzzdict import DictionaryError, read_tokens

    try:
        read_tokens(Path(cfg["fuzz.dict"]))
    except DictionaryError as exc:
        raise PreflightError("fuzz.dict", str(exc)) from None


def check_targets(cfg: Config, *, timeout_s: float = TARGET_IMPORT_TIMEOUT_S) -> None:
    """Import every target of a Python executor in a fresh process; the first problem is raised."""
    if cfg["campaign.executor"] not in PYTHON_EXECUTORS:
        return
    if os.environ.get(CHECKED_ENV) == targets_digest(cfg):
        return  # `symfence run` imported exactly these, from here, a moment ago
    from symfence.protocol.childenv import child_env

    targets = list(cfg["campaign.targets"])
    cmd = [sys.executable, "-m", "symfence.worker.concolic.check", *targets]
    # Its own session: a Ctrl-C on the terminal reaches us (and stops the check), not the
    # target's import code halfway through.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                if interrupt.requested():
                    raise interrupt.Interrupted(interrupt.requested()) from None
                if time.monotonic() > deadline:
                    raise PreflightError("campaign.targets", f"importing the targets took more than {timeout_s:g} s"
                                         " (does a target module do slow work at import time?)") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    seen: dict[str, str | None] = {}
    for line in stdout.splitlines():
        try:
            record = json.loads(line)
            seen[record["target"]] = record["error"]
        except (ValueError, KeyError, TypeError):
            continue  # a target printed something at import time
    for spec in targets:
        if spec not in seen:
            why = (stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise PreflightError(f"target {spec}", f"the import check did not finish: {why}")
        if error := seen[spec]:
            raise PreflightError(f"target {spec}", error)


# ---------------------------------------------------------------------------------- resume


def snapshot(cfg: Config) -> dict[str, Any]:
    """The effective config, as saved in OUT/campaign.json."""
    return {section: dict(values) for section, values in cfg.values.items()}


def save_snapshot(cfg: Config, out: Path) -> None:
    path = out / CONFIG_SNAPSHOT
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(snapshot(cfg), indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _work_options(values: dict[str, Any]) -> dict[str, Any]:
    try:
        return executor_options(Config(values))
    except KeyError:  # a snapshot from a version with other sections: compare what both have
        return {}


def check_resume(cfg: Config, out: Path) -> ResumeChanges:
    """Compare cfg with the config the campaign in `out` was started with."""
    path = out / CONFIG_SNAPSHOT
    try:
        saved = json.loads(path.read_text())
    except FileNotFoundError:
        return ResumeChanges()  # a campaign from before snapshots existed: nothing to compare
    except (OSError, ValueError) as exc:
        raise PreflightError("--resume", f"cannot read {path}: {exc}") from None
    now = snapshot(cfg)
    before_exec, now_exec = saved["campaign"]["executor"], now["campaign"]["executor"]
    if before_exec != now_exec:
        raise PreflightError("campaign.executor", f"changed from {before_exec!r} to {now_exec!r} since the"
                             f" campaign in {out} started; its work is for {before_exec!r} (use a new --out)")
    old_opts, new_opts = _work_options(saved), _work_options(now)
    if old_opts and old_opts != new_opts:
        keys = sorted(k for k in set(old_opts) | set(new_opts) if old_opts.get(k) != new_opts.get(k))
        section = MODES[now_exec].corpus.section + "."  # where the corpus engine's options come from
        names = [OPTION_KEYS.get(k, section + k) for k in keys]
        detail = ", ".join(f"{k} {old_opts.get(k, 'default')!r} -> {new_opts.get(k, 'default')!r}" for k in keys)
        raise PreflightError(names[0], f"changed since the campaign in {out} started ({detail}); every queued"
                             " work item was made with the old options (use a new --out)")
    before_targets = list(saved["campaign"]["targets"])
    removed = [t for t in before_targets if t not in cfg["campaign.targets"]]
    if removed:
        raise PreflightError("campaign.targets", f"{', '.join(removed)} removed since the campaign in {out}"
                             " started; its queued work would be orphaned (keep it, or use a new --out)")
    added = tuple(t for t in cfg["campaign.targets"] if t not in before_targets)
    changed = tuple(
        f"{section}.{key}"
        for section, values in now.items() for key, value in values.items()
        if f"{section}.{key}" not in ("campaign.targets", "campaign.executor")
        and saved.get(section, {}).get(key) != value
    )
    return ResumeChanges(added, changed)


# ---------------------------------------------------------------------------------- all of it


def preflight(cfg: Config, out: Path, *, resume: bool) -> ResumeChanges:
    """Every check, cheapest first. Raises PreflightError (or interrupt.Interrupted after a
    Ctrl-C); returns what a resume applies."""
    check_out(out)
    check_seeds(cfg)
    check_dictionary(cfg)
    changes = check_resume(cfg, out) if resume else ResumeChanges()
    interrupt.check()
    check_targets(cfg)
    check_native_targets(cfg)
    interrupt.check()
    return changes


def check_native_targets(cfg: Config) -> None:
    """Native targets: each binary (and its AFL build, when an AFL oracle is configured) exists."""
    if target_of(cfg["campaign.executor"]) is not TargetKind.NATIVE:
        return
    from symfence.protocol.options import NativeOptions

    opts = NativeOptions.from_mapping(cfg["native.options"])
    for target in cfg["campaign.targets"]:
        if opts.engine == "tritondse" and not Path(target).is_file():
            raise PreflightError("campaign.targets", f"{target} does not exist (for examples/native:"
                                 " python -m examples.native.build)")
        if opts.oracle != "engine" and not Path(opts.afl_path(target)).is_file():
            raise PreflightError("native.options.afl_target", f"{opts.afl_path(target)} does not exist"
                                 " (build the target with afl-cc, or set oracle = \"engine\")")
