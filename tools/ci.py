"""`symfence ci`: fuzz a repository's harnesses for a budget, then report only new, reproducible crashes.

One command from a repository with a harness: every Atheris harness of the repository (a file
defining ``TestOneInput`` or handing a function to ``atheris.Setup``), or the harness files
named (``ci_discover``), runs as ``symfence run fuzz_x.py
SEEDS... -max_total_time=BUDGET`` does, one after another, from the corpus folder
``CORPUS/<harness stem>/`` (kept in the repository or a CI cache) and the seeds and dictionary
found beside the harness, with the repository's ``src/`` and root on the import path and the
engine following the standard-library parsers the code imports. ``--config FILE`` runs a
campaign config instead (its targets, its seeds, the budget as ``campaign.duration_s``), from the
repository root. Each unique crash is then replayed in a fresh
interpreter on the plain target, first on the checked-out code (a crash that does not reproduce
there is listed as *flaky*), then on the base revision (``--base REF``: a ``git worktree`` of it,
the same harness file): a crash whose identity (docs/triage.md) the base also shows is *known*,
any other is *new*. Each new crash's input (the campaign's minimized one when it has it) goes into
the regressions folder, which the pytest plugin replays as ordinary test cases, and into the
SARIF file as one result.

``--batch`` is the scheduled job that keeps the corpus growing: it fuzzes the same way, writes every
corpus entry back into ``CORPUS/<name>/`` reduced with ``symfence cmin`` (so the cache stays
small), and reports crashes without failing on them.

Exit status: 0 no new crash (known and flaky crashes are listed only; always 0 with --batch);
1 at least one new crash; 2 usage (not a git repository, no harness, an unknown base revision, a
bad option); 3 a fuzzing run itself failed (its campaign could not start: the harness does not
import, MPI is missing).
"""

from __future__ import annotations

import enum
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from symfence.protocol.entrypoint import CONVENTION
from symfence.tools import ci_discover, regressions, sarif
from symfence.tools.campaign_dir import CampaignDir, CampaignDirError, SavedInput

EXIT_OK = 0
EXIT_NEW = 1
EXIT_USAGE = 2
EXIT_RUN_FAILED = 3
DEFAULT_BUDGET_S = 600.0
REPLAY_TIMEOUT_S = 10.0


class Status(str, enum.Enum):
    """What a crash found on the pull request is, against the base revision."""

    NEW = "new"  # reproduces here, not on the base (or the base has no such harness)
    KNOWN = "known"  # the base crashes on it with the same identity
    FLAKY = "flaky"  # does not reproduce on the checked-out code in a fresh process


@dataclass(frozen=True)
class FuzzTarget:
    """One target the job fuzzes: where its code is and what its findings are called."""

    name: str  # regressions folder name: the harness stem, or the target's module
    spec: regressions.RegressionTarget  # module:function and the folder first on sys.path
    harness: Path | None = None  # the harness file, for a drop-in run

    @classmethod
    def of_harness(cls, harness: Path, also: tuple[Path, ...] = ()) -> FuzzTarget:
        folder = harness.resolve().parent
        entry = ci_discover.entry_of(harness) or CONVENTION
        return cls(harness.stem, regressions.RegressionTarget(
            f"{harness.stem}:{entry}", folder, tuple(p for p in also if p != folder)), harness)

    def on(self, root: Path, base: Path) -> FuzzTarget:
        """The same target in the base revision's worktree ``base``."""
        def there(p: Path) -> Path:
            return base / p.resolve().relative_to(root.resolve())

        path = there(self.spec.path)
        harness = path / self.harness.name if self.harness else None
        spec = regressions.RegressionTarget(self.spec.target, path, tuple(there(p) for p in self.spec.also))
        return FuzzTarget(self.name, spec, harness)

    def exists(self) -> bool:
        if self.harness is not None:
            return self.harness.is_file()
        with regressions.on_path(self.spec):
            import importlib.util

            try:
                return importlib.util.find_spec(self.spec.module) is not None
            except (ImportError, ValueError):
                return False


@dataclass(frozen=True)
class CrashReport:
    """One unique crash of one target, as the CI job reports it."""

    target: FuzzTarget
    identity: str
    status: Status
    detail: str  # the traceback of the replay on the checked-out code
    frames: tuple[sarif.SourceFrame, ...]  # innermost first, in the repository
    data: bytes  # the reproducer's bytes (minimized when the campaign minimized it)
    reproducer: Path | None  # where it was written (new crashes only)
    base_identity: str = ""  # what the base did: an identity, "" ran fine / not replayed

    @property
    def command(self) -> str:
        """How a developer reproduces it from the repository root: the regression test itself (the
        plugin replays it with the harness's import path, whatever the harness's layout)."""
        if self.reproducer is None:
            return "symfence replay OUT"
        return f"pytest -q {shlex.quote(os.path.relpath(self.reproducer))}"

    @property
    def where(self) -> str:
        return f"{self.frames[0].file}:{self.frames[0].line}" if self.frames else "?"


class CiError(Exception):
    """A usage problem, as one line."""


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if proc.returncode:
        raise CiError(f"git {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def repo_root(start: Path) -> Path:
    return Path(_git(start, "rev-parse", "--show-toplevel").strip())


@contextmanager
def base_worktree(root: Path, ref: str) -> Iterator[Path]:
    """A detached ``git worktree`` of ``ref``, removed afterwards."""
    _git(root, "rev-parse", "--verify", "--quiet", ref + "^{commit}")
    home = Path(tempfile.mkdtemp(prefix="symfence-base-"))
    tree = home / "base"
    _git(root, "worktree", "add", "--detach", "--force", str(tree), ref)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@dataclass(frozen=True)
class Job:
    """One campaign of the CI job: a harness file (drop-in) or a config, and the targets it fuzzes."""

    name: str  # its folder under --out and under --corpus
    targets: tuple[FuzzTarget, ...]
    config: Path | None = None  # a config run; None: the one harness's run
    setup: ci_discover.HarnessSetup | None = None  # a harness run: its seeds, dict, paths, parsers

    def argv(self, out: Path, budget_s: float, ranks: int | None) -> list[str]:
        config = (budgeted_config(self.config, out, budget_s) if self.config is not None
                  else harness_config(self, out, budget_s))
        argv = [sys.executable, "-m", "symfence", "run", str(config), "--out", str(out), "--no-status"]
        return argv + (["--ranks", str(ranks)] if ranks else [])

    def env(self) -> dict[str, str]:
        """The campaign's environment: the harness's import path first on ``PYTHONPATH``."""
        paths = [str(p) for p in self.setup.import_path] if self.setup else []
        old = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
        return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *old])} if paths else dict(os.environ)


def harness_config(job: Job, out: Path, budget_s: float) -> Path:
    """The config of a harness's campaign, as ``symfence run HARNESS.py SEEDS... -max_total_time=B
    -dict=D`` writes it (``D``: the harness's dictionary and its source tokens), plus the stdlib
    parsers the engine follows; written into ``out``."""
    from symfence.coordinator.dropin import collect_seeds, parse, render

    setup = job.setup
    assert setup is not None
    argv = ["run", str(setup.harness), f"-max_total_time={budget_s:g}"]
    out.mkdir(parents=True, exist_ok=True)
    dictionary = setup.write_dictionary(out / "ci.dict")
    if dictionary is not None:
        argv.append(f"-dict={dictionary}")
    _, tables, _ = parse(argv)
    if collect_seeds(setup.unpack_seeds(out / "seed-zips"), out / "seeds"):
        tables["campaign"]["seeds"] = str((out / "seeds").resolve())
    if setup.instrument:
        tables.setdefault("concolic", {})["instrument"] = list(setup.instrument)
    path = out / "harness.toml"
    path.write_text(render(tables))
    return path


def budgeted_config(config: Path, out: Path, budget_s: float) -> Path:
    """A copy of ``config`` with ``campaign.duration_s`` the budget, written into ``out``."""
    import tomllib

    from symfence.coordinator.dropin import render

    tables: dict[str, dict] = {}

    def flatten(prefix: str, table: dict) -> None:
        scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
        if scalars or not prefix:
            tables[prefix] = scalars
        for k, v in table.items():
            if isinstance(v, dict):
                flatten(f"{prefix}.{k}" if prefix else k, v)

    flatten("", tomllib.loads(config.read_text()))
    top = tables.pop("", {})
    if top:
        raise CiError(f"{config}: keys outside a table ({', '.join(top)})")
    tables.setdefault("campaign", {})["duration_s"] = budget_s
    out.mkdir(parents=True, exist_ok=True)
    path = out / "ci-config.toml"
    path.write_text(render(tables))
    return path


def config_job(root: Path, config: Path) -> Job:
    import tomllib

    try:
        targets = tomllib.loads(config.read_text())["campaign"]["targets"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise CiError(f"{config}: not a campaign config with campaign.targets ({exc})") from None
    return Job(config.stem, tuple(FuzzTarget(t.partition(":")[0].rsplit(".", 1)[-1],
                                             regressions.RegressionTarget(t, root)) for t in targets), config)


def fuzz(job: Job, out: Path, budget_s: float, ranks: int | None,
         max_crashes: int = 0) -> int:
    """One campaign (``symfence run``) in a child process, stopped (SIGINT: the campaign's own
    clean stop) once ``max_crashes`` unique crashes are saved."""
    argv = job.argv(out, budget_s, ranks)
    print(f"symfence ci: fuzzing {job.name} for {budget_s:g} s -> {out}", flush=True)
    quiet = not os.environ.get("SYMFENCE_CI_VERBOSE")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL if quiet else None, env=job.env())
    stopped = False
    while proc.poll() is None:
        if max_crashes and not stopped and _saved_crashes(out) >= max_crashes:
            proc.send_signal(signal.SIGINT)
            stopped = True
        time.sleep(0.2)
    return proc.returncode


def _saved_crashes(out: Path) -> int:
    folder = out / "crashes"
    return sum(1 for p in folder.iterdir() if p.name.startswith("id:")) if folder.is_dir() else 0


def replay(target: FuzzTarget, data: bytes) -> tuple[str, str]:
    """(identity, or "" when it ran fine; "hang"; detail) of ``data`` on the plain target."""
    from symfence.protocol.crashid import code_under_test
    from symfence.tools.replay import identify_run
    from symfence.worker.concolic.replay import Verdict, replay_plain

    name = target.spec.target
    with regressions.on_path(target.spec):
        run = replay_plain(name, data, REPLAY_TIMEOUT_S)
        if run.verdict is Verdict.HUNG:
            return "hang", run.detail
        if run.verdict is not Verdict.CRASHED:
            return "", run.detail
        return identify_run("crash", run.detail, name, code_under_test(name, None)), run.detail


def _crashes(out: Path) -> list[SavedInput]:
    try:
        return [f for f in CampaignDir.open(out).findings() if f.kind == "crash"]
    except CampaignDirError:
        return []


def judge(root: Path, job: Job, out: Path, base: Path | None, folder: Path | None) -> list[CrashReport]:
    """Every unique crash the campaign in ``out`` saved, replayed here and on ``base``; each new
    one written into the regressions ``folder`` (None: not written)."""
    by_name = {t.spec.target: t for t in job.targets}
    reports: dict[tuple[str, str], CrashReport] = {}
    for item in _crashes(out):
        target = by_name.get(item.target)
        if target is None:
            continue
        data = item.minimized or item.data
        identity, detail = replay(target, data)
        if not identity and item.minimized:
            data = item.data
            identity, detail = replay(target, data)
        key = (target.name, identity or item.identity or "unknown")
        if not identity:
            reports.setdefault(key, CrashReport(target, key[1], Status.FLAKY, item.detail, (), data, None))
            continue
        if key in reports and reports[key].status is not Status.FLAKY:
            continue
        base_identity = ""
        if base is not None:
            on_base = target.on(root, base)
            if on_base.exists():
                base_identity, _ = replay(on_base, data)
        status = Status.KNOWN if base_identity == identity else Status.NEW
        keep = status is Status.NEW and folder is not None
        path = regressions.write(folder, target.name, target.spec, data) if keep and folder else None
        reports[key] = CrashReport(target, identity, status, detail, sarif.repo_frames(detail, root), data,
                                   path, base_identity)
    return list(reports.values())


def grow_corpus(job: Job, out: Path, corpus: Path) -> int:
    """``symfence cmin`` of the campaign's corpus into ``corpus`` (replacing it); entries kept."""
    paths = list(dict.fromkeys(str(p) for t in job.targets for p in t.spec.paths))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory(prefix="symfence-cmin-") as tmp:
        kept = Path(tmp) / "kept"
        proc = subprocess.run([sys.executable, "-m", "symfence", "cmin", str(out), "--to", str(kept)],
                              capture_output=True, text=True, env=env)
        files = [p for p in kept.rglob("*") if p.is_file()] if kept.is_dir() else []
        if proc.returncode or not files:
            print(f"symfence ci: cmin of {out} kept nothing (exit {proc.returncode}):"
                  f" {proc.stderr.strip()[-300:]}", file=sys.stderr)
            return 0
        if corpus.is_dir():
            shutil.rmtree(corpus)
        corpus.mkdir(parents=True)
        for p in files:
            shutil.copyfile(p, corpus / p.name)
        return len(files)


def summary(reports: list[CrashReport]) -> str:
    """A few lines a CI log reader acts on: each crash with file:line, new ones with how to reproduce."""
    lines = []
    for status in Status:
        for r in (r for r in reports if r.status is status):
            lines.append(f"{status.value.upper():5}  {r.identity}  at {r.where}  ({r.target.spec.target})")
            if r.reproducer is not None:
                lines.append(f"       reproduce: {r.command}")
    counts = {s: sum(1 for r in reports if r.status is s) for s in Status}
    lines.append(f"symfence ci: {counts[Status.NEW]} new crash(es), {counts[Status.KNOWN]} known,"
                 f" {counts[Status.FLAKY]} not reproducible")
    return "\n".join(lines)


def _jobs(root: Path, args, corpus_root: Path) -> list[Job]:  # noqa: ANN001
    """The campaigns to run, each announced in one line (which harness, found how, from what)."""
    if args.config:
        if args.harnesses:
            raise CiError("give harness files or --config, not both")
        return [config_job(root, Path(args.config).resolve())]
    named = [Path(h).resolve() for h in args.harnesses]
    try:
        harnesses = named or ci_discover.find_harnesses(root)
        for h in harnesses:
            ci_discover.check_harness(h)
    except ci_discover.DiscoveryError as exc:
        raise CiError(str(exc)) from None
    if not harnesses:
        raise CiError(f"no harness in {root}: no Python file of the repository is an Atheris harness"
                      " (TestOneInput(data) at its top level, or a function handed to atheris.Setup);"
                      " name one (symfence ci path/to/fuzz_x.py)"
                      " or give a campaign config (symfence ci --config FILE)")
    stems: dict[str, Path] = {}
    for h in harnesses:
        if not h.is_relative_to(root):
            raise CiError(f"{h}: not in the repository {root}")
        if h.stem in stems:
            raise CiError(f"two harnesses are both module {h.stem!r} ({_rel(stems[h.stem], root)},"
                          f" {_rel(h, root)}): name the one to fuzz (symfence ci {_rel(h, root)})")
        stems[h.stem] = h
    listed = ", ".join(_rel(h, root) for h in harnesses)
    if named:
        print(f"symfence ci: harness {listed} (named)")
    elif len(harnesses) == 1:
        print(f"symfence ci: harness {listed} (the one file of the repository that is an Atheris harness)")
    else:
        print(f"symfence ci: {len(harnesses)} harnesses, each fuzzed for"
              f" --budget {args.budget:g} s, one after another: {listed}; to fuzz only some, name them"
              f" (symfence ci {_rel(harnesses[0], root)})")
    sources = ci_discover.python_files(root)
    jobs = []
    for h in harnesses:
        setup = ci_discover.setup(root, h, corpus_root / h.stem, sources)
        print(f"symfence ci: {_rel(h, root)}: {setup.describe(root)}")
        jobs.append(Job(h.stem, (FuzzTarget.of_harness(h, setup.import_path),), setup=setup))
    return jobs


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def run_ci(args) -> int:  # noqa: ANN001 - argparse.Namespace
    try:
        root = repo_root(Path.cwd())
        if args.budget <= 0:
            raise CiError(f"--budget {args.budget:g}: must be > 0")
        corpus_root = Path(args.corpus).resolve() if args.corpus else root / "fuzz-corpus"
        jobs = _jobs(root, args, corpus_root)
        out_root = Path(args.out).resolve() if args.out else root / "out" / "ci"
        folder = Path(args.regressions).resolve() if args.regressions else root / regressions.DEFAULT_FOLDER
        sarif_path = Path(args.sarif).resolve() if args.sarif else out_root / "symfence.sarif"
        if args.base and subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet",
                                         args.base + "^{commit}"], capture_output=True).returncode:
            raise CiError(f"--base {args.base}: not a commit of this repository (fetch it first:"
                          " e.g. actions/checkout with fetch-depth: 0)")
    except CiError as exc:
        print(f"symfence ci: {exc}", file=sys.stderr)
        return EXIT_USAGE
    failed = False
    for job in jobs:
        out = out_root / job.name
        if out.exists():
            shutil.rmtree(out)
        code = fuzz(job, out, args.budget, args.ranks, args.max_crashes)
        if not (out / "campaign.json").exists():
            print(f"symfence ci: the campaign of {job.name} failed (exit {code}); see {out}", file=sys.stderr)
            failed = True
    reports: list[CrashReport] = []
    with (base_worktree(root, args.base) if args.base else _nothing()) as base:
        for job in jobs:
            reports += judge(root, job, out_root / job.name, base, None if args.batch else folder)
    if args.batch:
        for job in jobs:
            kept = grow_corpus(job, out_root / job.name, corpus_root / job.name)
            print(f"symfence ci: corpus {corpus_root / job.name}: {kept} entries after cmin")
    new = [r for r in reports if r.status is Status.NEW]
    sarif.write(sarif_path, new, root)
    print(summary(reports))
    print(f"SARIF: {sarif_path}")
    if failed:
        return EXIT_RUN_FAILED
    return EXIT_NEW if new and not args.batch else EXIT_OK


@contextmanager
def _nothing() -> Iterator[None]:
    yield None
