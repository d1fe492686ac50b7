"""`symfence ci`: fuzz a repository's harnesses for a budget, then report only new, reproducible crashes.

One command from a repository with a harness: every ``fuzz_*.py`` the repository tracks (or the
harness files named) runs as ``symfence run fuzz_x.py CORPUS -max_total_time=BUDGET`` does, one
after another, from the corpus folder ``CORPUS/<harness stem>/`` (kept in the repository or a CI
cache). Each unique crash is then replayed in a fresh interpreter on the plain harness, first on
the checked-out code (a crash that does not reproduce there is listed as *flaky*), then on the base
revision (``--base REF``: a ``git worktree`` of it, the same harness file): a crash whose identity
(docs/triage.md) the base also shows is *known*, any other is *new*. Each new crash's input (the
campaign's minimized one when it has it) goes into the regressions folder, which the pytest plugin
replays as ordinary test cases, and into the SARIF file as one result.

``--batch`` is the scheduled job that keeps the corpus growing: it fuzzes the same way, writes every
corpus entry back into ``CORPUS/<stem>/`` reduced with ``symfence cmin`` (so the cache stays
small), and reports crashes without failing on them.

Exit status: 0 no new crash (known and flaky crashes are listed only); 1 at least one new crash;
2 usage (not a git repository, no harness, an unknown base revision, a bad option); 3 a fuzzing
run itself failed (its campaign could not run: the harness does not import, MPI is missing).
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

from symfence.tools import regressions, sarif
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
class CrashReport:
    """One unique crash of one harness, as the CI job reports it."""

    target: str  # harness stem:TestOneInput
    harness: Path  # the harness file in the checked-out repository
    identity: str
    status: Status
    detail: str  # the traceback of the replay on the checked-out code
    frames: tuple[sarif.SourceFrame, ...]  # innermost first, in the repository
    data: bytes  # the reproducer's bytes (minimized when the campaign minimized it)
    reproducer: Path | None  # where it was written (new crashes only)
    base_identity: str = ""  # what the base did: an identity, "" ran fine / not replayed

    @property
    def command(self) -> str:
        def rel(p: Path) -> str:
            return shlex.quote(os.path.relpath(p))

        return f"python {rel(self.harness)} {rel(self.reproducer) if self.reproducer else 'INPUT'}"

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


def find_harnesses(root: Path) -> list[Path]:
    """The tracked ``fuzz_*.py`` files of the repository (libFuzzer/OSS-Fuzz naming)."""
    names = _git(root, "ls-files", "*fuzz_*.py").split()
    return [root / n for n in sorted(names) if Path(n).name.startswith("fuzz_")]


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
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def fuzz(harness: Path, corpus: Path, out: Path, budget_s: float, ranks: int | None,
         max_crashes: int = 0) -> int:
    """One drop-in campaign of ``harness`` (``symfence run fuzz_x.py``) in a child process,
    stopped (SIGINT: the campaign's own clean stop) once ``max_crashes`` unique crashes are saved."""
    argv = [sys.executable, "-m", "symfence", "run", str(harness)]
    if corpus.is_dir() and any(corpus.iterdir()):
        argv.append(str(corpus))
    argv += [f"-max_total_time={budget_s:g}", "--out", str(out), "--no-status"]
    if ranks:
        argv += ["--ranks", str(ranks)]
    print(f"symfence ci: fuzzing {harness.name} for {budget_s:g} s -> {out}", flush=True)
    quiet = not os.environ.get("SYMFENCE_CI_VERBOSE")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL if quiet else None)
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


def replay(harness: Path, data: bytes) -> tuple[str, str]:
    """(identity or "" when it ran fine or hung, detail) of ``data`` on the plain ``harness``."""
    from symfence.protocol.crashid import code_under_test
    from symfence.tools.replay import identify_run
    from symfence.worker.concolic.replay import Verdict, replay_plain

    target = f"{harness.stem}:TestOneInput"
    with regressions.harness_on_path(harness):
        run = replay_plain(target, data, REPLAY_TIMEOUT_S)
        if run.verdict is Verdict.HUNG:
            return "hang", run.detail
        if run.verdict is not Verdict.CRASHED:
            return "", run.detail
        return identify_run("crash", run.detail, target, code_under_test(target, None)), run.detail


def _crashes(out: Path) -> list[SavedInput]:
    try:
        return [f for f in CampaignDir.open(out).findings() if f.kind == "crash"]
    except CampaignDirError:
        return []


def judge_harness(root: Path, harness: Path, out: Path, base: Path | None,
                  folder: Path | None) -> list[CrashReport]:
    """Every unique crash the campaign in ``out`` saved, replayed here and on ``base``."""
    reports: dict[str, CrashReport] = {}
    rel = harness.resolve().relative_to(root.resolve())
    base_harness = base / rel if base is not None else None
    for item in _crashes(out):
        data = item.minimized or item.data
        identity, detail = replay(harness, data)
        if not identity and item.minimized:
            data = item.data
            identity, detail = replay(harness, data)
        if not identity:
            identity = item.identity or "unknown"
            reports.setdefault(identity, CrashReport(f"{harness.stem}:TestOneInput", harness, identity,
                                                     Status.FLAKY, item.detail, (), data, None))
            continue
        if identity in reports and reports[identity].status is not Status.FLAKY:
            continue
        base_identity = ""
        if base_harness is not None and base_harness.is_file():
            base_identity, _ = replay(base_harness, data)
        status = Status.KNOWN if base_identity == identity else Status.NEW
        frames = sarif.repo_frames(detail, root)
        path = regressions.write(folder, harness, data) if status is Status.NEW and folder else None
        reports[identity] = CrashReport(f"{harness.stem}:TestOneInput", harness, identity, status, detail,
                                        frames, data, path, base_identity)
    return list(reports.values())


def grow_corpus(out: Path, corpus: Path) -> int:
    """``symfence cmin`` of the campaign's corpus into ``corpus`` (replacing it); entries kept."""
    with tempfile.TemporaryDirectory(prefix="symfence-cmin-") as tmp:
        kept = Path(tmp) / "kept"
        proc = subprocess.run([sys.executable, "-m", "symfence", "cmin", str(out), "--to", str(kept)],
                              capture_output=True, text=True)
        if proc.returncode or not kept.is_dir():
            print(f"symfence ci: cmin of {out} failed: {proc.stderr.strip()[-300:]}", file=sys.stderr)
            return 0
        files = [p for p in kept.rglob("*") if p.is_file()]
        if corpus.is_dir():
            shutil.rmtree(corpus)
        corpus.mkdir(parents=True)
        for p in files:
            shutil.copyfile(p, corpus / p.name)
        return len(files)


def summary(reports: list[CrashReport], root: Path) -> str:
    """A few lines a CI log reader acts on: each new crash with file:line and how to reproduce."""
    lines = []
    for status in Status:
        for r in (r for r in reports if r.status is status):
            lines.append(f"{status.value.upper():5}  {r.identity}  at {r.where}  ({r.target})")
            if r.reproducer is not None:
                lines.append(f"       reproduce: {r.command}")
    counts = {s: sum(1 for r in reports if r.status is s) for s in Status}
    lines.append(f"symfence ci: {counts[Status.NEW]} new crash(es), {counts[Status.KNOWN]} known,"
                 f" {counts[Status.FLAKY]} not reproducible")
    return "\n".join(lines)


def run_ci(args) -> int:  # noqa: ANN001 - argparse.Namespace
    try:
        root = repo_root(Path.cwd())
        harnesses = [Path(h).resolve() for h in args.harnesses] or find_harnesses(root)
        if not harnesses:
            raise CiError(f"{root}: no harness (name one, or track a fuzz_*.py file)")
        for h in harnesses:
            if not h.is_file():
                raise CiError(f"{h}: no such harness file")
            h.relative_to(root)
        if args.budget <= 0:
            raise CiError(f"--budget {args.budget:g}: must be > 0")
        corpus_root = Path(args.corpus) if args.corpus else root / "fuzz-corpus"
        out_root = Path(args.out).resolve() if args.out else root / "out" / "ci"
        folder = Path(args.regressions) if args.regressions else root / regressions.DEFAULT_FOLDER
        sarif_path = Path(args.sarif) if args.sarif else out_root / "symfence.sarif"
        if args.base:
            _git(root, "rev-parse", "--verify", "--quiet", args.base + "^{commit}")
    except (CiError, ValueError) as exc:
        print(f"symfence ci: {exc}", file=sys.stderr)
        return EXIT_USAGE
    failed = False
    for h in harnesses:
        out = out_root / h.stem
        if out.exists():
            shutil.rmtree(out)
        code = fuzz(h, corpus_root / h.stem, out, args.budget, args.ranks, args.max_crashes)
        if not (out / "campaign.json").exists():
            print(f"symfence ci: the campaign of {h.name} failed (exit {code}); see {out}", file=sys.stderr)
            failed = True
    reports: list[CrashReport] = []
    with (base_worktree(root, args.base) if args.base else _nothing()) as base:
        for h in harnesses:
            reports += judge_harness(root, h, out_root / h.stem, base, None if args.batch else folder)
    if args.batch:
        for h in harnesses:
            kept = grow_corpus(out_root / h.stem, corpus_root / h.stem)
            print(f"symfence ci: corpus {corpus_root / h.stem}: {kept} entries after cmin")
    new = [r for r in reports if r.status is Status.NEW]
    sarif.write(sarif_path, new, root)
    print(summary(reports, root))
    print(f"SARIF: {sarif_path}")
    if failed:
        return EXIT_RUN_FAILED
    return EXIT_NEW if new and not args.batch else EXIT_OK


@contextmanager
def _nothing() -> Iterator[None]:
    yield None
