"""The end of a campaign (coordinator/cli.py `_end_job`), driven many times without MPI: every exit
status prints the summary, closes the journal with the run row written, and only then ends the
job (MPI_Abort for exit 6, MPI_Finalize otherwise); and rank 0 waits for what it printed to be
read from its stdout pipe before it aborts (`wait_forwarded`).

The campaign, journal and output folder are real; MPI's two calls at the very end (Abort,
Finalize) are recorded instead of made, so the sequence can run 20 times per exit status in a
second. The real-mpiexec runs of the same ending are in tests/test_mpi_stop_hung.py."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

import pytest

from symfence.coordinator import cli
from symfence.coordinator import log as logsetup
from symfence.coordinator.campaign import Campaign
from symfence.coordinator.config import parse
from symfence.coordinator.failure import ExitCode, describe
from symfence.coordinator.journal import Journal
from symfence.coordinator.outputs import OutputDir


class Aborted(Exception):
    """MPI_Abort ends the process: nothing after it runs."""


class Comm:
    """The two calls of MPI's world communicator the end of the job makes, recorded."""

    def __init__(self, calls: list[tuple[str, int]]) -> None:
        self.calls = calls

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's name
        return 3

    def Abort(self, code: int) -> None:  # noqa: N802 - mpi4py's name
        self.calls.append(("abort", code))
        raise Aborted(code)


def _campaign(tmp: Path, calls: list[tuple[str, int]]) -> tuple[Campaign, Journal, io.TextIOWrapper]:
    cfg = parse({"campaign": {"executor": "synthetic"}}, tmp / "c.toml")
    out = OutputDir(tmp / "out")
    handle = logsetup.configure(out.logs / "coordinator.jsonl", console=None, rank=0)
    journal = Journal.open(out.root / "journal.sqlite", resume=False)
    campaign = Campaign(cfg, Comm(calls), out, journal)
    journal.begin_run(campaign.minter.epoch.hex())
    campaign.stop_reason = "duration reached"
    return campaign, journal, handle


def _end(campaign: Campaign, journal: Journal, handle, calls, monkeypatch) -> int | None:
    monkeypatch.setattr(cli, "_finalize_with_watchdog", lambda: calls.append(("finalize", 0)))
    journal.end_run(clean=campaign.failure is None)  # what Campaign._shutdown does before this
    try:
        return cli._end_job(campaign, journal, campaign.comm, campaign.exit_code(), handle)
    except Aborted:
        return None


ENDINGS = {
    "ok": (lambda c: None, ExitCode.OK),
    "all workers lost": (lambda c: setattr(c, "all_lost", True), ExitCode.FAILED),
    "storage": (lambda c: c.fail(OSError(28, "No space left on device", "/x")), ExitCode.STORAGE),
    "internal": (lambda c: c.fail(RuntimeError("a bug")), ExitCode.INTERNAL),
    "hung worker": (lambda c: setattr(c, "unstopped", [2]), ExitCode.RANKS_LOST),
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_every_ending_prints_the_summary_then_ends_the_job(ending, tmp_path, capsys, monkeypatch):
    setup, code = ENDINGS[ending]
    for i in range(20):
        calls: list[tuple[str, int]] = []
        campaign, journal, handle = _campaign(tmp_path / str(i), calls)
        setup(campaign)
        returned = _end(campaign, journal, handle, calls, monkeypatch)
        printed = capsys.readouterr()
        assert printed.out.startswith("campaign finished: duration reached\n"), (ending, printed)
        assert "conservation" in printed.out and "outputs:" in printed.out
        if campaign.failure is not None:
            assert printed.err.strip().endswith(describe_line(campaign)), printed.err
        if code == ExitCode.RANKS_LOST:
            assert calls == [("abort", code)] and returned is None  # aborted, never finalized
        else:
            assert calls == [("finalize", 0)] and returned == code
        assert journal.closed
        run = Journal.read_only(tmp_path / str(i) / "out" / "journal.sqlite")
        try:
            last = run.runs()[-1]
        finally:
            run.close()
        assert last.ended is not None and last.clean == (campaign.failure is None), (ending, last)


def describe_line(campaign: Campaign) -> str:
    return f"symfence: {campaign.failure.line}"


def test_a_summary_that_fails_still_prints_its_first_line_and_ends_the_job(tmp_path, capsys, monkeypatch):
    calls: list[tuple[str, int]] = []
    campaign, journal, handle = _campaign(tmp_path, calls)
    campaign.unstopped = [2]

    def broken() -> str:
        raise KeyError("a bug in the summary")

    monkeypatch.setattr(campaign, "summary", broken)
    returned = _end(campaign, journal, handle, calls, monkeypatch)
    printed = capsys.readouterr()
    assert printed.out.startswith("campaign finished: duration reached (the summary failed")
    assert "internal error in the coordinator: KeyError" in printed.err
    assert returned is None and calls == [("abort", ExitCode.INTERNAL)]  # the job still ends


def test_a_failed_journal_close_is_reported_and_the_summary_still_printed(tmp_path, capsys, monkeypatch):
    calls: list[tuple[str, int]] = []
    campaign, journal, handle = _campaign(tmp_path, calls)

    def full_disk() -> None:
        raise OSError(28, "No space left on device", str(tmp_path / "out" / "journal.sqlite"))

    monkeypatch.setattr(journal, "close", full_disk)
    returned = _end(campaign, journal, handle, calls, monkeypatch)
    printed = capsys.readouterr()
    assert printed.out.startswith("campaign finished:")
    assert describe(OSError(28, "x")).exit_code == returned == ExitCode.STORAGE
    assert "storage error: cannot write" in printed.err and calls == [("finalize", 0)]


def test_wait_forwarded_returns_once_the_reader_has_read_everything():
    r, w = os.pipe()
    try:
        os.write(w, b"campaign finished: ...\n" * 400)  # ~9 KB waiting in the pipe
        t0 = time.monotonic()
        assert cli.wait_forwarded((w,), 0.2) is False  # nobody reads: it gives up after its time-out
        assert 0.15 <= time.monotonic() - t0 < 2.0

        def read_later() -> None:
            time.sleep(0.3)
            while os.read(r, 65536):
                pass

        reader = threading.Thread(target=read_later, daemon=True)
        t0 = time.monotonic()
        reader.start()
        assert cli.wait_forwarded((w,), 5.0) is True
        assert time.monotonic() - t0 >= 0.25  # it waited for the reader
    finally:
        os.close(w)
        os.close(r)


def test_wait_forwarded_has_nothing_to_wait_for_on_a_file(tmp_path):
    with open(tmp_path / "out.txt", "w") as fh:
        fh.write("summary\n")
        fh.flush()
        t0 = time.monotonic()
        assert cli.wait_forwarded((fh.fileno(),), 5.0) is True
        assert time.monotonic() - t0 < 0.5
