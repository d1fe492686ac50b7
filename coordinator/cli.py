"""Command-line entry points: `symfence run|logs|status|recover`, and the per-rank MPI main."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import symfence
from symfence.coordinator import failpoints, interrupt

# Worker ranks import only what they run: the config and preflight modules (and what they
# pull in) are imported by the functions of rank 0 and the `symfence` command that use them.
# With 64 ranks on 2 cores, every module a worker imports costs start-up time 64 times.

EXIT_CONFIG = 2
MPI_ENV = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", help="output directory (default: campaign.output from the config)")
    p.add_argument("--resume", action="store_true", help="continue the campaign in an existing output directory")
    p.add_argument("--verbose", action="store_true", help="also print high-volume events on the console")
    p.add_argument("--no-status", action="store_true", help="no live status line")
    p.add_argument("--show-quarantine", action="store_true",
                   help="always show quarantine counts and conservation in the live view (default: only when non-zero)")
    p.add_argument("--retry-failed", action="store_true",
                   help="with --resume: give work items that used up dispatch.max_attempts another chance")
    p.add_argument("--store", metavar="STORE",
                   help="join the campaign in this shared store (campaign.store): sqlite:PATH or postgresql://...")


def store_of_run(cfg, args: argparse.Namespace) -> str:
    """The campaign store this run joins: `--store`, else `campaign.store` ("" = none);
    ConfigError naming the key if it cannot name one."""
    from symfence.coordinator.config import ConfigError
    from symfence.coordinator.shared import store_problem

    store = getattr(args, "store", None)
    if store is None:
        return cfg["campaign.store"]
    problem = store_problem(store)
    if problem:
        raise ConfigError("campaign.store (--store)", problem)
    return store


def fail(message: str, code: int = EXIT_CONFIG) -> int:
    print(f"symfence: {message}", file=sys.stderr)
    return code


def check_outdir(out: Path, resume: bool) -> str | None:
    """The one-line reason this output directory cannot be used, or None."""
    has_journal = (out / "journal.sqlite").exists()
    if has_journal and not resume:
        return f"{out} already holds a campaign: pass --resume to continue it, or choose another --out"
    if resume and not has_journal:
        return f"--resume: {out} holds no campaign journal to resume"
    return None


# ---------------------------------------------------------------------------------- symfence run


def cmd_run(args: argparse.Namespace) -> int:
    from symfence.coordinator.config import ConfigError, import_path, load
    from symfence.coordinator.preflight import CHECKED_ENV, PreflightError, preflight, targets_digest
    from symfence.protocol.childenv import put_first_on_path

    interrupt.install()  # a Ctrl-C from here until mpiexec runs: one line, exit 130
    try:
        cfg = load(args.config)
        store_of_run(cfg, args)
    except ConfigError as exc:
        return fail(f"config error: {exc}")
    put_first_on_path(import_path(cfg))  # for the start-up check and every rank mpiexec starts
    out = cfg.output_dir(args.out)
    problem = check_outdir(out, args.resume)
    if problem:
        return fail(problem)
    try:
        preflight(cfg, out, resume=args.resume)
    except PreflightError as exc:
        return fail(str(exc))
    except interrupt.Interrupted as exc:
        return fail(f"interrupted ({exc}) during start-up: nothing was launched", interrupt.EXIT_INTERRUPTED)
    os.environ[CHECKED_ENV] = targets_digest(cfg)  # rank 0 need not import them again
    forwarded = ["--config", str(args.config)] + (["--out", str(out)]) + (["--resume"] if args.resume else []) \
        + (["--verbose"] if args.verbose else []) + (["--no-status"] if args.no_status else []) \
        + (["--show-quarantine"] if args.show_quarantine else []) \
        + (["--retry-failed"] if args.retry_failed else []) \
        + (["--store", args.store] if args.store else [])
    if any(v in os.environ for v in MPI_ENV):
        return mpi_main(forwarded)  # already launched by mpirun: run this rank's role
    ranks = args.ranks or cfg["campaign.ranks"]
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if mpiexec is None:
        return fail("mpiexec not found (pip install mpich, or put your MPI's mpiexec on PATH)", 1)
    cmd = [mpiexec, "-n", str(ranks), sys.executable, "-m", "symfence.coordinator", *forwarded]
    if sys.stdout.isatty():
        from symfence.coordinator.status_line import TTY_ENV

        os.environ[TTY_ENV] = "1"  # rank 0 draws the live status line through mpiexec
        os.environ.setdefault("COLUMNS", str(shutil.get_terminal_size().columns))
    print(f"symfence: launching {' '.join(cmd)}", file=sys.stderr, flush=True)
    if interrupt.requested():
        return fail(f"interrupted ({interrupt.requested()}) during start-up: nothing was launched",
                    interrupt.EXIT_INTERRUPTED)
    os.execv(mpiexec, cmd)


# ---------------------------------------------------------------------------------- per-rank main


def mpi_main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m symfence.coordinator", description="one rank of a symfence campaign")
    p.add_argument("--config", required=True)
    add_run_options(p)
    args = p.parse_args(argv)
    interrupt.install()  # until the campaign loop (rank 0) or SIG_IGN (workers) takes over

    # Open MPI with ULFM: skip the fence in MPI_Finalize, which can hang once a peer has died
    # (must be set before MPI_Init; other MPIs ignore it).
    os.environ.setdefault("OMPI_MCA_async_mpi_finalize", "1")
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    peers = comm.Dup()  # collective on every rank: the fault injector's side channel
    if comm.Get_rank() == 0:
        try:
            return _coordinator_rank(args, comm, peers)
        except Exception as exc:  # noqa: BLE001 - any rank-0 error must end the whole job
            interrupt.ignore()  # the loop's handlers may be gone: a Ctrl-C must not interrupt this
            import structlog

            from symfence.coordinator.failure import rank0_failed

            code = rank0_failed(comm, exc, structlog.get_logger())
            _finalize_with_watchdog()
            return code
    return _worker_rank(comm, peers)


def _stop_workers(comm) -> None:
    from mpi4py import MPI

    from symfence.protocol.codec import encode
    from symfence.protocol.messages import Control, ControlKind, Tag

    frame = encode(Control(ControlKind.STOP))
    for rank in range(1, comm.Get_size()):
        comm.Send([frame, MPI.BYTE], rank, Tag.CONTROL)


def _coordinator_rank(args: argparse.Namespace, comm, peers=None) -> int:
    try:
        return _coordinate(args, comm, peers)
    except interrupt.Interrupted as exc:
        # Ctrl-C before the campaign loop ran: nothing was dispatched. Release the workers
        # (they wait for SETUP) and end quietly.
        _stop_workers(comm)
        print(f"symfence: interrupted ({exc}) during start-up: nothing was dispatched", file=sys.stderr, flush=True)
        _finalize_with_watchdog()
        return interrupt.EXIT_INTERRUPTED


def _coordinate(args: argparse.Namespace, comm, peers=None) -> int:
    from symfence.coordinator.config import ConfigError, import_path, load
    from symfence.coordinator.preflight import PreflightError, preflight
    from symfence.protocol.childenv import put_first_on_path

    interrupt.check()
    try:
        cfg = load(args.config)
        store = store_of_run(cfg, args)
    except ConfigError as exc:
        _stop_workers(comm)
        return fail(f"config error: {exc}")
    put_first_on_path(import_path(cfg))  # (launched by mpirun directly; the workers get it in SETUP)
    out_path = cfg.output_dir(args.out)
    problem = check_outdir(out_path, args.resume)
    if problem:
        _stop_workers(comm)
        return fail(problem)
    try:
        changes = preflight(cfg, out_path, resume=args.resume)
    except PreflightError as exc:
        _stop_workers(comm)
        return fail(str(exc))
    if comm.Get_size() < 2:
        return fail("a campaign needs at least 2 ranks (1 coordinator + workers): mpiexec -n 3 ...", 1)

    import structlog
    import uvloop

    from symfence.coordinator import log as logsetup
    from symfence.coordinator.campaign import Campaign
    from symfence.coordinator.failure import ExitCode
    from symfence.coordinator.journal import Journal, JournalError, JournalExistsError, JournalLockedError
    from symfence.coordinator.outputs import OutputDir
    from symfence.coordinator.preflight import save_snapshot
    from symfence.coordinator.status_line import StatusLine

    interrupt.check()
    out = OutputDir(out_path)
    handle = logsetup.configure(out.logs / "coordinator.jsonl", verbose=args.verbose, rank=0)
    try:
        journal = Journal.open(out.root / "journal.sqlite", resume=args.resume,
                               batch_ops=cfg["journal.batch_ops"], batch_ms=cfg["journal.batch_ms"],
                               synchronous=cfg["journal.synchronous"])
    except JournalError as exc:
        _stop_workers(comm)
        usage = isinstance(exc, (JournalExistsError, JournalLockedError))  # not a storage fault
        return fail(str(exc), EXIT_CONFIG if usage else ExitCode.STORAGE)
    if args.retry_failed:
        structlog.get_logger().info("campaign.retry_failed", retried=journal.retry_failed())
    if changes.added_targets or changes.changed_keys:
        structlog.get_logger().info("campaign.config_changed", added_targets=list(changes.added_targets),
                                    changed=list(changes.changed_keys))
    save_snapshot(cfg, out.root)  # what this run uses; the next --resume compares against it
    status = StatusLine(enabled=not args.no_status, show_quarantine=args.show_quarantine)
    coordinator = Campaign(cfg, comm, out, journal, status=status, peers_comm=peers)
    if store:  # issue 29: this coordinator joins a campaign shared with others (sharedwork.py)
        from symfence.coordinator.shared.interface import StoreError
        from symfence.coordinator.sharedwork import SharedWork

        try:
            coordinator.shared = SharedWork.open(store, cfg["store.coordinator"], cfg["store.lease_s"],
                                                 cfg["store.lease_batch"], coordinator)
        except (StoreError, ValueError) as exc:
            _stop_workers(comm)
            journal.close()
            return fail(f"config error: campaign.store: {exc}")
    journal.begin_run(coordinator.minter.epoch.hex())
    code = uvloop.run(coordinator.run())  # a start-up Ctrl-C already seen stops it at once
    # The loop's handlers are gone: a Ctrl-C now (the job is closing, e.g. in MPI_Finalize,
    # writing owed queue files or in the interpreter's exit) must change nothing: the run stopped.
    interrupt.ignore()
    return _end_job(coordinator, journal, comm, code, handle)


def _end_job(coordinator, journal, comm, code: int, handle) -> int:
    """The end of every campaign that ran, whatever its exit status: the journal closed, the
    summary and the lines that explain the status printed, then MPI_Finalize, or MPI_Abort when
    a worker never answered STOP (exit 6). Every step runs even if one before it raised (the
    first error is the one reported), so no exit path loses the summary or the journal's end."""
    import structlog

    from symfence.coordinator import log as logsetup
    from symfence.coordinator.failure import ExitCode, report

    log = structlog.get_logger()

    def step(what, fn) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - keep ending the job; the first failure is reported
            if coordinator.failure is None:
                coordinator.fail(exc)
            else:  # after a failure (a full disk fails the final flush too): one line, no traceback
                log.warning("campaign.end_step_failed", step=what, error=f"{type(exc).__name__}: {exc}")

    step("journal.close", journal.close)  # a failed final flush: what is durable stays
    if coordinator.failure is not None:
        code = coordinator.exit_code()
    step("summary", lambda: _print_summary(coordinator))
    if coordinator.failure is not None:
        code = coordinator.exit_code()

    def explain() -> None:  # the lines on stderr that say why the status is not 0
        if code == ExitCode.REFUSED:  # the summary's REFUSED lines say which rank, how many and why
            print("symfence: results of workers that are not banned were refused (a bug in symfence, see"
                  f" the summary); exit status {int(code)}", file=sys.stderr, flush=True)
        if coordinator.hosts.problem:  # a worker's host lacks a file or has another version of it
            print(f"symfence: {coordinator.hosts.problem}", file=sys.stderr, flush=True)
        if coordinator.failure is not None:
            report(coordinator.failure)

    step("explain", explain)
    if coordinator.unstopped:
        step("log", lambda: log.warning("campaign.abort_hung", ranks=coordinator.unstopped, exit_code=code))
    logsetup.close(handle)  # a failed final write of the log was reported above
    if coordinator.unstopped:  # a hung worker: MPI_Finalize would hang and mpiexec's code vary
        _owed_files_line(coordinator)  # no queue files now: the job ends at once (a resume writes them)
        _abort(comm, code or 1)
    failpoints.hit("finalize")
    _finalize_with_watchdog()
    return _write_owed_files(coordinator, code)


def _print_summary(coordinator) -> None:
    try:
        text = coordinator.summary()
    except Exception:
        print(f"campaign finished: {coordinator.stop_reason} (the summary failed: see"
              " logs/coordinator.jsonl)", flush=True)
        raise
    print(text, flush=True)


# After MPI_Finalize, the queue files still owed are written for at most this long; the rest
# (durable in the journal) are written by the next --resume, and the tools read the journal.
# SYMFENCE_OWED_FILES_S overrides it ("inf": write every one, however long it takes).
OWED_FILES_BUDGET_S = 0.5
OWED_FILES_ENV = "SYMFENCE_OWED_FILES_S"
# How long rank 0 waits, before MPI_Abort, for mpiexec to take what it printed (the summary).
FORWARD_TIMEOUT_S = 2.0


def _abort(comm, code: int) -> None:
    """MPI_Abort, once what this rank printed has left its stdout and stderr. mpiexec reads them
    through pipes (or sockets) and may tear the job down on the abort before reading the last
    bytes written: the summary printed just before would be lost."""
    fds = []
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
            fds.append(stream.fileno())
        except (OSError, ValueError):  # closed, or not a file (nothing mpiexec reads)
            pass
    wait_forwarded(tuple(fds), FORWARD_TIMEOUT_S)
    comm.Abort(code)


def wait_forwarded(fds: tuple[int, ...], timeout_s: float) -> bool:
    """Wait until nobody has yet to read what was written to these pipes or sockets (Linux:
    FIONREAD on a pipe, SIOCOUTQ on a socket); True when they are empty, False on time-out.
    A terminal or a file has nothing to wait for."""
    import fcntl
    import stat
    import struct
    import termios
    import time

    def unread(fd: int) -> int:
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode):
                request = termios.FIONREAD
            elif stat.S_ISSOCK(mode):
                request = termios.TIOCOUTQ  # == SIOCOUTQ
            else:
                return 0
            return struct.unpack("i", fcntl.ioctl(fd, request, b"\0\0\0\0"))[0]
        except OSError:
            return 0  # closed, or not a kind that says: nothing to wait for

    until = time.monotonic() + timeout_s
    while any(unread(fd) for fd in fds):
        if time.monotonic() >= until:
            return False
        time.sleep(0.005)
    return True


def _owed_files_line(coordinator) -> None:
    """One line on stderr for the queue files left owed; none after a failure, whose own one
    line already says that --resume continues from what is durable."""
    owed = coordinator.writer.files_pending if coordinator.writer is not None else 0
    if owed and coordinator.failure is None:
        print(f"symfence: {owed} queue/ files not written: their entries are durable in the journal"
              " (symfence status/replay/cmin read them there; --resume writes the files)",
              file=sys.stderr, flush=True)


def _owed_files_budget() -> float | None:
    """Seconds for the owed queue files at the end (None: no limit), from SYMFENCE_OWED_FILES_S."""
    try:
        budget = float(os.environ.get(OWED_FILES_ENV, OWED_FILES_BUDGET_S))
    except ValueError:
        budget = OWED_FILES_BUDGET_S  # not a number: the default, never a failed exit
    return None if budget == float("inf") else max(0.0, budget)


def _write_owed_files(coordinator, code: int) -> int:
    """The queue files the writer thread still owed at the end (their entries are durable),
    written after MPI_Finalize so that no worker waits for them, for at most OWED_FILES_BUDGET_S;
    a failed write is exit 3."""
    from symfence.coordinator.failure import describe, report

    try:
        coordinator.write_owed_files(_owed_files_budget())
    except OSError as exc:
        failure = describe(exc)
        if coordinator.failure is None:
            report(failure)
            return failure.exit_code
    _owed_files_line(coordinator)
    return code


def _worker_rank(comm, peers) -> int:
    import signal

    _import_structlog_without_rich()  # first: the log module below imports structlog
    from symfence.coordinator import log as logsetup

    # mpiexec forwards Ctrl-C / SIGTERM to every rank; the coordinator turns it into a drain
    # and a STOP, so a worker must not die of it mid-task.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from symfence.worker.endpoint import Endpoint
    from symfence.worker.loop import EXIT_ORPHANED, Worker

    handles = []

    def configure(path: str, rank: int) -> None:
        handles.append(logsetup.configure(Path(path), console=None, rank=rank, role="worker",
                                          forward=worker.log_forwarder))

    worker = Worker(Endpoint(comm), Endpoint(peers), configure)
    code = worker.run()
    for h in handles:
        logsetup.close(h)  # a full disk loses the worker's last lines, never its exit code
    if code == EXIT_ORPHANED:  # rank 0 is unreachable: MPI_Finalize could only hang
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    _finalize_with_watchdog()
    return code


def _import_structlog_without_rich() -> None:
    """A worker rank logs JSON to its file only, never to a console: import structlog with its
    optional rich support hidden (rich is then importable again). rich costs ~50 ms of CPU per
    rank, i.e. seconds of start-up with 64 ranks on 2 cores."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


def _finalize_with_watchdog(timeout_s: float | None = None) -> None:
    """MPI_Finalize can hang when a peer died or hangs; exit (code 1) instead of hanging the job.

    faulthandler's timer runs in a C thread: a Python timer would never fire, because
    MPI_Finalize does not release the GIL. SYMFENCE_FINALIZE_TIMEOUT_S overrides the 15 s."""
    import faulthandler

    from mpi4py import MPI

    if timeout_s is None:
        timeout_s = float(os.environ.get("SYMFENCE_FINALIZE_TIMEOUT_S", "15"))
    faulthandler.dump_traceback_later(timeout_s, exit=True)
    MPI.Finalize()
    faulthandler.cancel_dump_traceback_later()


# ---------------------------------------------------------------------------------- triage tools


def _triage_parsers(sub) -> None:  # noqa: ANN001 - argparse's subparsers action
    """`replay`, `cmin`, `coverage`: offline tools over a campaign's output (symfence.tools, docs/triage.md)."""
    replay = sub.add_parser("replay", help="re-run saved crashes and hangs on the current code"
                                           " (exit 1: still crashes)")
    replay.add_argument("paths", nargs="+", metavar="OUT | FILE",
                        help="a campaign's output directory, or saved files")
    replay.add_argument("--corpus", action="store_true",
                        help="replay queue/ too and report new crashes and hangs")
    replay.add_argument("--target", action="append", metavar="[OLD=]NEW",
                        help="run NEW in place of the campaign's target OLD (a rebuilt binary, another"
                             " module)")
    replay.add_argument("-j", "--jobs", type=int, default=0, help="replays at a time (default: up to 4)")
    replay.add_argument("-v", "--verbose", action="store_true",
                        help="print each replay's traceback or report")
    cmin = sub.add_parser("cmin", help="the fewest corpus entries that keep every edge (afl-cmin's semantics)")
    cmin.add_argument("outdir", metavar="OUT")
    cmin.add_argument("--to", required=True, metavar="DIR", help="folder for the kept entries (new or empty)")
    cmin.add_argument("--target", help="only this target's corpus (default: each target, one folder each)")
    cmin.add_argument("--edges-only", action="store_true", help="ignore hit counts (afl-cmin -e)")
    cmin.add_argument("--afl-binary",
                      help="native: the afl-cc build to trace (default: native.options.afl_target)")
    cmin.add_argument("--oracle", choices=("forkserver", "showmap"), default="forkserver",
                      help="native: trace through the campaign's forkserver (default) or afl-showmap")
    cov = sub.add_parser("coverage", help="a line-coverage report (HTML, JSON) of the code under test")
    cov.add_argument("outdir", metavar="OUT")
    cov.add_argument("--html", required=True, metavar="DIR", help="folder for the report (DIR/index.html)")
    cov.add_argument("--target", help="only this target (default: each target, one folder each)")
    cov.add_argument("--modules", help="Python: comma-separated modules whose lines count (default: the"
                                       " harness's"
                                       " MODULES, else the target's module)")
    cov.add_argument("--gcov-binary", help="native: the target built with cc --coverage")
    cov.add_argument("--source-root", help="native: the sources' root folder for gcovr (default: .)")
    _ci_parser(sub)


def _ci_parser(sub) -> None:  # noqa: ANN001 - argparse's subparsers action
    """`ci`: fuzz a repository's harnesses and report new crashes (symfence.tools.ci, docs/ci.md)."""
    ci = sub.add_parser("ci", help="fuzz the repository's harnesses for a budget; exit 1 only for crashes"
                                   " the base revision does not have (SARIF, regression files)")
    ci.add_argument("harnesses", nargs="*", metavar="HARNESS.py", help="default: every tracked fuzz_*.py")
    ci.add_argument("--config", metavar="FILE", help="fuzz a campaign config's targets instead of harness files")
    ci.add_argument("--base", metavar="REF", help="the base revision: its crashes are known, not new")
    ci.add_argument("--budget", type=float, default=600.0, help="seconds of fuzzing per harness (default 600)")
    ci.add_argument("--corpus", metavar="DIR", help="corpus folders DIR/<harness stem> (default fuzz-corpus)")
    ci.add_argument("--out", metavar="DIR", help="campaign outputs (default out/ci)")
    ci.add_argument("--sarif", metavar="FILE", help="the SARIF 2.1.0 file (default OUT/symfence.sarif)")
    ci.add_argument("--regressions", metavar="DIR",
                    help="where new crashes are kept for pytest (default tests/fuzz_regressions)")
    ci.add_argument("--batch", action="store_true",
                    help="grow the corpus (cmin'ed back into --corpus); crashes do not fail the run")
    ci.add_argument("--max-crashes", type=int, default=0, metavar="N",
                    help="stop a harness's fuzzing once it saved N unique crashes (default: the budget)")
    ci.add_argument("-n", "--ranks", type=int, help="MPI world size (default: campaign.ranks)")


def _dispatch(module: str, function: str):  # noqa: ANN202
    def run(args: argparse.Namespace) -> int:
        import importlib

        return getattr(importlib.import_module(module), function)(args)

    return run


TRIAGE_COMMANDS = {
    "replay": _dispatch("symfence.tools.replay", "run_replay"),
    "cmin": _dispatch("symfence.tools.cmin", "run_cmin"),
    "coverage": _dispatch("symfence.tools.coverage_report", "run_coverage"),
    "ci": _dispatch("symfence.tools.ci", "run_ci"),
}


# ---------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    from symfence.coordinator import dropin

    argv = sys.argv[1:] if argv is None else argv
    if dropin.is_harness_run(argv):  # `symfence run fuzz_x.py corpus/ -max_total_time=60`
        try:
            args, _ = dropin.prepare(argv)
        except dropin.UsageError as exc:
            return fail(str(exc))
        return cmd_run(args)
    p = argparse.ArgumentParser(prog="symfence", description="pipelined MPI coordinator for distributed concolic execution")
    p.add_argument("--version", action="version", version=f"symfence {symfence.__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run (or resume) a campaign; launches mpiexec unless already under MPI")
    run.add_argument("config", help="campaign TOML file, e.g. configs/demo.toml; or an Atheris harness"
                     " fuzz_x.py [CORPUS_DIR...] [-max_total_time=N -dict=FILE -timeout=S -rss_limit_mb=M]")
    run.add_argument("-n", "--ranks", type=int, help="MPI world size (default: campaign.ranks)")
    add_run_options(run)
    logs = sub.add_parser("logs", help="tail and filter a campaign's JSON logs")
    logs.add_argument("outdir")
    logs.add_argument("--follow", "-f", action="store_true")
    logs.add_argument("--event", action="append", help="only this event (repeatable), e.g. result.quarantined")
    logs.add_argument("--reason", action="append", help="only this quarantine reason (repeatable)")
    logs.add_argument("--rank", type=int, action="append", help="only this rank's log (repeatable)")
    logs.add_argument("--json", action="store_true", help="print the raw JSON lines (for jq)")
    status = sub.add_parser("status", help="summarise a campaign's journal and stats")
    status.add_argument("outdir")
    plot = sub.add_parser("plot", help="draw PNG charts of a campaign over time (coverage, speed, corpus, findings, per target)")
    plot.add_argument("outdir")
    plot.add_argument("--to", help="folder for the PNGs (default: OUTDIR/plots)")
    recover = sub.add_parser("recover", help="rebuild a damaged journal from queue/ and crashes/")
    recover.add_argument("outdir")
    recover.add_argument("--config", required=True, help="the campaign's TOML file")
    _triage_parsers(sub)
    args = p.parse_args(argv)
    if args.command in TRIAGE_COMMANDS:
        return TRIAGE_COMMANDS[args.command](args)
    if args.command == "plot":
        from symfence.coordinator.plot import PlotError, plot_campaign

        try:
            written = plot_campaign(Path(args.outdir), Path(args.to) if args.to else None)
        except PlotError as exc:
            return fail(str(exc), 1)
        for path in written:
            print(path)
        return 0
    if args.command == "run":
        return cmd_run(args)
    if args.command == "recover":
        from symfence.coordinator.rebuild import run_recover

        return run_recover(Path(args.outdir), args.config)
    if args.command == "logs":
        from symfence.coordinator.logtail import run_logs

        return run_logs(args)
    from symfence.coordinator.status_report import StatusError, render_status

    try:
        print(render_status(Path(args.outdir)))
    except StatusError as exc:
        return fail(str(exc), 1)
    return 0
