"""The pytest plugin (``pytest11``): ``pytest --symfence-replay OUT`` makes each saved crash a test case.

Each crash and hang a campaign saved in ``OUT`` becomes one test item,
``symfence-replay/<OUT name>::crashes/id:000002``: it replays the input exactly as ``symfence
replay`` does (a fresh process, the plain target, the campaign's time limit) and fails while the
input still crashes (the traceback of this run, and whether the crash identity is the saved one)
or still hangs; it passes once the bug is fixed. The option may be given several times. A
directory that is not a campaign is a usage error. The plugin imports nothing of symfence until
the option is used, so it costs nothing in other pytest runs.

Without any option, every ``crash-*`` file of a regressions folder (a file next to a
``target.json``, as ``symfence ci`` writes them under ``tests/fuzz_regressions/<harness>/``) that
pytest's collection walks over is one test case, ``tests/fuzz_regressions/fuzz_x/crash-...``: the
input replayed on the plain harness in a fresh interpreter; it fails while the input crashes or
hangs and passes once the bug is fixed (``tools/regressions.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("symfence")
    group.addoption("--symfence-replay", action="append", default=[], metavar="OUT",
                    help="make each crash and hang saved in the campaign output OUT a test case (repeatable)")


class _ReplayItem(pytest.Item):
    """A replayed input: a failure is shown as the replay's account, without pytest's traceback."""

    def repr_failure(self, excinfo, style=None):  # noqa: ANN001, ANN201
        if isinstance(excinfo.value, SavedFindingFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)


class SavedFindingItem(_ReplayItem):
    def __init__(self, *, runner, finding, **kwargs) -> None:  # noqa: ANN001
        super().__init__(**kwargs)
        self.runner = runner
        self.finding = finding
        self.add_marker("symfence_replay")

    def runtest(self) -> None:
        from symfence.tools.replay import CRASHING, HANGING, Now, judge

        f = self.finding
        row = judge(f, self.runner.run(f.target, f.data), f.target,
                    under_test=self.runner.under_test(f.target))
        if row.now is Now.FIXED:
            return
        if row.now is Now.UNREPLAYABLE:
            raise RuntimeError(f"{f.label} of {f.target} could not be replayed: {row.detail.strip()}")
        assert row.now in CRASHING or row.now in HANGING
        ident = f"{row.saved} -> {row.identity}" if row.now is Now.DIFFERENT else row.identity
        raise SavedFindingFailed(f"{f.label} ({f.target}) {row.now.value}: {ident}\n"
                                 f"input ({len(f.data)} bytes): {f.data[:200]!r}\n{row.detail.rstrip()}")

    def reportinfo(self):  # noqa: ANN201
        return self.path, None, f"symfence replay {self.finding.label}"


class SavedFindingFailed(AssertionError):
    """A saved finding still crashes or hangs on the current code."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "symfence_replay: a saved crash or hang replayed by --symfence-replay")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    outs = config.getoption("symfence_replay")
    if not outs:
        return
    from symfence.tools.campaign_dir import CampaignDir, CampaignDirError
    from symfence.tools.replay import Runner

    for out in outs:
        try:
            campaign = CampaignDir.open(out)
            runner = Runner.for_campaign(campaign, {})
            findings = campaign.findings()
        except CampaignDirError as exc:
            raise pytest.UsageError(f"--symfence-replay: {exc}") from None
        root = Path(out).resolve()
        for f in findings:
            items.append(SavedFindingItem.from_parent(
                session, name=f"{root.name}::{f.label}", nodeid=f"symfence-replay/{root.name}::{f.label}",
                path=root, runner=runner, finding=f))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if not file_path.name.startswith("crash-") or not (file_path.parent / "target.json").is_file():
        return None
    return RegressionFile.from_parent(parent, path=file_path)


class RegressionFile(pytest.File):
    """A reproducer kept by ``symfence ci``: one test case."""

    def collect(self):  # noqa: ANN201
        yield RegressionItem.from_parent(self, name="replay")


class RegressionItem(_ReplayItem):
    def runtest(self) -> None:
        from symfence.tools.regressions import RegressionTarget, on_path
        from symfence.worker.concolic.replay import Verdict, replay_plain

        spec = RegressionTarget.read(self.path.parent)
        if not spec.path.is_dir():
            raise RuntimeError(f"{self.path}: its folder {spec.path} is gone (edit target.json)")
        data = self.path.read_bytes()
        with on_path(spec):
            run = replay_plain(spec.target, data, 10.0)
        if run.verdict is Verdict.RAN_FINE:
            return
        if run.verdict is Verdict.UNKNOWN:
            raise RuntimeError(f"{self.path.name} of {spec.target} could not be replayed:"
                               f" {run.detail.strip()}")
        raise SavedFindingFailed(f"{self.path.name} ({spec.target}) still {run.verdict.value}\n"
                                 f"input ({len(data)} bytes): {data[:200]!r}\n{run.detail.rstrip()}")

    def reportinfo(self):  # noqa: ANN201
        return self.path, None, f"symfence regression {self.path.name}"
