"""`symfence replay`: saved crashes and hangs re-run on the current code, which are fixed (the CI gate).

Every input runs in a fresh process on the plain target (Python: the function itself in a new
interpreter, no engine, no tracer; native: the plain build), with the campaign's own per-input
time limit (``coordinator.config.exec_timeout_s``). A crash is compared with the saved one by
crash identity (type + top 3 frames, ``protocol.crashid``): the same identity means the same
bug. ``--corpus`` replays ``queue/`` too: a corpus entry that crashes or hangs now is new.

Exit status (``EXIT_*``; the highest-priority one that applies):
1 something crashes (the same bug, another bug, or a new crash from the corpus);
5 nothing crashes, but some input could not be replayed (the target cannot be loaded or run);
4 nothing crashes, but something still hangs;
0 every saved crash and hang is fixed (and, with --corpus, no corpus entry crashes or hangs);
2 a usage problem (no such campaign, a file outside one without --target, an unknown target).
"""

from __future__ import annotations

import enum
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from symfence.protocol.crashid import identity_from_detail
from symfence.protocol.pycrash import code_under_test
from symfence.tools.campaign_dir import CampaignDir, CampaignDirError, SavedInput, locate
from symfence.worker.concolic.replay import Replay, Verdict

EXIT_FIXED = 0
EXIT_CRASHES = 1
EXIT_USAGE = 2
EXIT_HANGS = 4
EXIT_UNREPLAYABLE = 5
HANG_IDENTITY = "hang"


class Now(str, enum.Enum):
    """What a saved input does on the current code."""

    SAME = "still crashes (same identity)"
    DIFFERENT = "crashes differently"
    FIXED = "fixed"
    HANGS = "still hangs"
    NEW_CRASH = "new crash"  # a corpus entry (--corpus) that crashes now, unlike any saved crash
    KNOWN_CRASH = "crashes like a saved crash"  # a corpus entry with a saved crash's identity
    NEW_HANG = "new hang"
    UNREPLAYABLE = "could not replay"


CRASHING = (Now.SAME, Now.DIFFERENT, Now.NEW_CRASH, Now.KNOWN_CRASH)
HANGING = (Now.HANGS, Now.NEW_HANG)


def identify_run(kind: str, detail: str, target: str, under_test: Iterable[str] | None = None) -> str:
    """The crash identity of one run from its detail (the one switch to issue 19's identity)."""
    return HANG_IDENTITY if kind == "hang" else identity_from_detail(detail, target, None, under_test).key


def saved_identity(item: SavedInput, under_test: Iterable[str] | None = None) -> str:
    """A saved finding's identity under today's rules, as a replay's is computed: from its saved
    detail (the confirming rank's account), so a campaign saved under older rules compares
    like with like; the journal's stored identity only when the detail has no frames and the
    stored one does (a native crash's edge path)."""
    if item.kind == "hang":
        return HANG_IDENTITY
    now = identity_from_detail(item.detail, item.target, None, under_test) if item.detail else None
    if now is not None and (now.has_frames or not item.identity):
        return now.key
    return item.identity or (now.key if now is not None else "unknown")


@dataclass(frozen=True)
class Row:
    item: SavedInput
    now: Now
    saved: str  # saved identity ("" for a corpus entry)
    identity: str  # the identity now ("" when it ran fine)
    detail: str  # the replay's traceback / reason


@dataclass(frozen=True)
class Runner:
    """How to run one campaign's targets plainly: the campaign's time limit, targets remapped."""

    campaign: CampaignDir | None
    timeout_s: float
    native: bool
    remap: dict[str, str]
    input_mode: str = "stdin"
    mem_limit_mb: int = 0

    @classmethod
    def for_campaign(cls, campaign: CampaignDir, remap: dict[str, str]) -> Runner:
        mode, mem = "stdin", 0
        if campaign.native:
            from symfence.protocol.options import NativeOptions

            opts = NativeOptions.from_mapping(campaign.cfg["native.options"])
            mode, mem = opts.input, opts.target_mem_limit_mb
        elif not campaign.python:
            raise CampaignDirError(f"{campaign.root}: a {campaign.executor} campaign has no target to replay")
        return cls(campaign, campaign.timeout_s, campaign.native, remap, mode, mem)

    def target(self, target: str) -> str:
        return self.remap.get(target, target)

    def under_test(self, target: str) -> frozenset[str]:
        """The campaign's code under test for ``target`` (``pycrash.code_under_test`` of its
        executor options, as the campaign computed its identities)."""
        if self.native or self.campaign is None:
            return frozenset()
        from symfence.coordinator.config import executor_options

        return code_under_test(target, executor_options(self.campaign.cfg))

    def run(self, target: str, data: bytes) -> Replay:
        target = self.target(target)
        if self.native:
            from symfence.protocol.nativecrash import is_sanitizer_report
            from symfence.worker.native.plain import run_plain
            from symfence.worker.triage.symbolize import native_detail

            run = run_plain(target, data, input_mode=self.input_mode, timeout_s=self.timeout_s,
                            mem_limit_mb=self.mem_limit_mb)
            if run.verdict is not Verdict.CRASHED or is_sanitizer_report(run.detail):
                return run
            # The frames the campaign's confirmation took (a gdb run of the plain build).
            frames = native_detail(target, data, self.input_mode, timeout_s=max(self.timeout_s, 2.0))
            return Replay(run.verdict, f"{run.detail}\n{frames}" if frames else run.detail)
        from symfence.worker.concolic.replay import replay_plain

        return replay_plain(target, data, self.timeout_s)


def judge(item: SavedInput, replay: Replay, target: str,
          known_identities: dict[str, set[str]] | None = None,
          under_test: Iterable[str] | None = None) -> Row:
    """Compare what an input does now with what the campaign saved (``under_test``: the
    campaign's code under test for ``target``, ``Runner.under_test``)."""
    corpus = item.kind == "queue"
    saved = "" if corpus else saved_identity(item, under_test)
    known_identities = known_identities or {}
    if replay.verdict is Verdict.UNKNOWN:
        return Row(item, Now.UNREPLAYABLE, saved, "", replay.detail)
    if replay.verdict is Verdict.RAN_FINE:
        return Row(item, Now.FIXED, saved, "", "")
    if replay.verdict is Verdict.HUNG:
        return Row(item, Now.NEW_HANG if corpus else Now.HANGS, saved, HANG_IDENTITY, replay.detail)
    identity = identify_run("crash", replay.detail, target, under_test)
    if corpus:
        known = identity in known_identities.get(item.target, ())
        return Row(item, Now.KNOWN_CRASH if known else Now.NEW_CRASH, saved, identity, replay.detail)
    return Row(item, Now.SAME if identity == saved else Now.DIFFERENT, saved, identity, replay.detail)


def replay_all(runner: Runner, items: Iterable[SavedInput], jobs: int = 1) -> list[Row]:
    """Each input in a fresh process (``jobs`` at a time), the rows in input order. A corpus
    entry that is also a saved finding (the same bytes for the same target) is not run twice."""
    items = list(items)
    found = {(i.target, i.data) for i in items if i.kind != "queue"}
    items = [i for i in items if i.kind != "queue" or (i.target, i.data) not in found]
    known: dict[str, set[str]] = {}
    for i in items:
        if i.kind == "crash":
            known.setdefault(i.target, set()).add(saved_identity(i, runner.under_test(i.target)))

    def one(item: SavedInput) -> Row:
        return judge(item, runner.run(item.target, item.data), item.target, known,
                     runner.under_test(item.target))

    if jobs <= 1 or len(items) <= 1:
        return [one(i) for i in items]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, items))


def exit_code(rows: Iterable[Row]) -> int:
    nows = {r.now for r in rows}
    if nows & set(CRASHING):
        return EXIT_CRASHES
    if Now.UNREPLAYABLE in nows:
        return EXIT_UNREPLAYABLE
    if nows & set(HANGING):
        return EXIT_HANGS
    return EXIT_FIXED


# ---------------------------------------------------------------------------------- the table


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def render(rows: list[Row], *, replayed_corpus: int = 0) -> str:
    """One table: a line per saved finding (and per corpus entry that crashes or hangs now)."""
    shown = [r for r in rows if r.item.kind != "queue" or r.now is not Now.FIXED]
    header = ("input", "target", "now", "identity")
    lines = [header]
    for r in shown:
        if r.now is Now.DIFFERENT:
            ident = f"{r.saved} -> {r.identity}"
        elif r.now is Now.UNREPLAYABLE:
            ident = r.detail.strip().splitlines()[-1] if r.detail.strip() else "?"
        else:
            ident = r.identity or r.saved
        lines.append((_short(r.item.label, 48), _short(r.item.target, 40), r.now.value, ident))
    widths = [max(len(line[i]) for line in lines) for i in range(3)]
    out = ["  ".join(c.ljust(w) for c, w in zip(line[:3], widths)) + "  " + line[3] for line in lines]
    counts = {now: sum(1 for r in rows if r.now is now) for now in Now}
    findings = sum(1 for r in rows if r.item.kind != "queue")
    summary = [f"{findings} saved crashes and hangs replayed"]
    summary += [f"{n} {now.value}" for now, n in counts.items() if n and now is not Now.FIXED]
    summary.append(f"{sum(1 for r in rows if r.now is Now.FIXED and r.item.kind != 'queue')} fixed")
    if replayed_corpus:
        summary.append(f"{replayed_corpus} corpus entries replayed")
    out.append("")
    out.append(", ".join(summary))
    return "\n".join(out)


# ---------------------------------------------------------------------------------- the command


def _remap(values: list[str], campaign: CampaignDir | None) -> dict[str, str]:
    remap: dict[str, str] = {}
    for value in values:
        old, sep, new = value.partition("=")
        if not sep:
            if campaign is None or len(campaign.targets) != 1:
                raise CampaignDirError(f"--target {value}: name the target it replaces (OLD=NEW);"
                                       " the campaign"
                                       " has " + (", ".join(campaign.targets) if campaign else "no config"))
            old, new = campaign.targets[0], value
        elif campaign is not None:
            campaign.check_target(old)
        remap[old] = new
    return remap


def _from_files(paths: list[Path], remap_args: list[str]) -> tuple[list[tuple[Runner, list[SavedInput]]],
                                                                   int]:
    """FILES...: each must be in a campaign's crashes/, hangs/ or queue/."""
    groups: dict[Path, tuple[Runner, list[SavedInput]]] = {}
    corpus = 0
    for path in paths:
        where = locate(path)
        if where is None:
            raise CampaignDirError(f"{path} is not a file in a campaign's crashes/, hangs/ or queue/"
                                   " (replay a campaign with: symfence replay OUT)")
        root, kind, ident = where
        if root not in groups:
            campaign = CampaignDir.open(root)
            groups[root] = (Runner.for_campaign(campaign, _remap(remap_args, campaign)), [])
        runner, items = groups[root]
        assert runner.campaign is not None
        pool = runner.campaign.corpus() if kind == "queue" else runner.campaign.findings()
        match = [i for i in pool if i.kind == kind and i.ident == ident]
        if not match:
            raise CampaignDirError(f"{path}: the journal of {root} has no {kind} {ident:06d}")
        item = match[0]
        if kind == "queue":
            corpus += 1
        items.append(item if item.path else replace(item, path=Path(path)))
    return list(groups.values()), corpus


def run_replay(args) -> int:  # noqa: ANN001 - argparse.Namespace
    paths = [Path(p) for p in args.paths]
    jobs = args.jobs or max(1, min(4, os.cpu_count() or 1))
    try:
        if len(paths) == 1 and paths[0].is_dir():
            campaign = CampaignDir.open(paths[0])
            runner = Runner.for_campaign(campaign, _remap(args.target or [], campaign))
            items = campaign.findings()
            corpus = campaign.corpus() if args.corpus else []
            groups = [(runner, items + corpus)]
            replayed_corpus = len(corpus)
        else:
            if args.corpus:
                raise CampaignDirError("--corpus replays a campaign's queue/: give the campaign's"
                                       " OUT directory")
            groups, replayed_corpus = _from_files(paths, args.target or [])
    except CampaignDirError as exc:
        print(f"symfence replay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    rows = [row for runner, items in groups for row in replay_all(runner, items, jobs)]
    replayed_corpus = sum(1 for r in rows if r.item.kind == "queue")
    if not rows:
        print("no saved crashes or hangs to replay")
        return EXIT_FIXED
    print(render(rows, replayed_corpus=replayed_corpus))
    if args.verbose:
        for r in rows:
            if r.detail and r.now is not Now.FIXED:
                print(f"\n--- {r.item.label} ({r.now.value})\n{r.detail.rstrip()}")
    return exit_code(rows)
