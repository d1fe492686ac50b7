"""A throw-away PostgreSQL server for tests: initdb and pg_ctl in a temporary folder, or a reason.

`start_server()` finds Debian's (or any) PostgreSQL binaries, runs `initdb` in a new temporary
folder (trust authentication, no TCP: one unix socket in that folder, on a free port number)
and `pg_ctl start`; `PgServer.stop()` stops it (fast mode) and removes the folder. As root, the
server is run as the `postgres` user (PostgreSQL refuses to run as root); without binaries, a
user to run them as, or psycopg, `start_server` raises `PgUnavailable` with the reason, which
the tests print when they skip.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class PgUnavailable(RuntimeError):
    """The throw-away server cannot be started here (the message says why)."""


def _bindir() -> Path:
    """SYMFENCE_PG_BINDIR if set (only it), else Debian's newest, else pg_ctl's folder on PATH."""
    explicit = os.environ.get("SYMFENCE_PG_BINDIR")
    candidates = [explicit] if explicit else sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    on_path = shutil.which("pg_ctl")
    if on_path and not explicit:
        candidates.append(str(Path(on_path).parent))
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    raise PgUnavailable("no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PgServer:
    """A running throw-away server: `dsn` for psycopg; `stop()` ends it and removes its folder."""

    folder: Path
    port: int
    bindir: Path
    user: str | None  # who runs the server (None: ourselves)
    listen: str = ""  # the TCP address it listens on too ("": unix socket only)

    @property
    def dsn(self) -> str:
        """Over the unix socket in its folder."""
        return f"host={self.folder} port={self.port} user=postgres dbname=postgres"

    @property
    def tcp_dsn(self) -> str:
        """Over TCP to `listen`, as from another host."""
        return f"host={self.listen} port={self.port} user=postgres dbname=postgres connect_timeout=5"

    def _run(self, *args: str, timeout: float = 60,
             wrap: Callable[[list[str]], list[str]] | None = None) -> subprocess.CompletedProcess[str]:
        command = list(args)
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        if wrap is not None:
            command = wrap(command)
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)

    def stop(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate",
                  "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


def start_server(*, durable: bool = False, listen: str = "",
                 wrap: Callable[[list[str]], list[str]] | None = None) -> PgServer:
    """initdb + pg_ctl start in a new temporary folder; raises PgUnavailable with the reason.
    Tests run it without fsync (it is thrown away); `durable` keeps PostgreSQL's defaults
    (fsync, synchronous_commit, full page writes), as benchmarks must. `listen`: a TCP address
    to accept connections on too (any client, no password); `wrap`: how to run `pg_ctl start`
    (e.g. on a network-namespace host: bench.netns.Cluster.on)."""
    try:
        import psycopg  # noqa: F401  (the client the stores use)
    except ImportError as exc:
        raise PgUnavailable(f"psycopg is not installed (pip install -e '.[postgres]'): {exc}") from exc
    bindir = _bindir()
    user: str | None = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError as exc:
            raise PgUnavailable("running as root and there is no `postgres` user to run the server") from exc
        if shutil.which("runuser") is None:
            raise PgUnavailable("running as root and `runuser` is missing")
        user = "postgres"
    folder = Path(tempfile.mkdtemp(prefix="symfence-pg-"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    server = PgServer(folder, _free_port(), bindir, user, listen)
    data = folder / "data"
    init = server._run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                       *(() if durable else ("--no-sync",)), "-E", "UTF8", "--locale=C")
    if init.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise PgUnavailable(f"initdb failed: {init.stderr.strip()[-300:]}")
    options = (f"-c listen_addresses='{listen}' -c unix_socket_directories='{folder}' -p {server.port} "
               "-c max_connections=50")
    if listen:
        with (data / "pg_hba.conf").open("a") as hba:
            hba.write("host all all 0.0.0.0/0 trust\n")
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    start = server._run(str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l",
                        str(folder / "server.log"), "-w", "-t", "30", "start", wrap=wrap)
    if start.returncode != 0:
        log_file = folder / "server.log"
        log = log_file.read_text(errors="replace")[-300:] if log_file.exists() else ""
        server.stop()
        raise PgUnavailable(f"pg_ctl start failed: {start.stderr.strip()[-300:]} {log}")
    return server


_SERVER: PgServer | None = None
_REASON = ""


def shared_server() -> PgServer:
    """One throw-away server for the whole test session (started on first use, stopped at exit);
    raises PgUnavailable (the same reason every time) when it cannot be started."""
    global _SERVER, _REASON
    if _SERVER is None and not _REASON:
        try:
            _SERVER = start_server()
        except PgUnavailable as exc:
            _REASON = str(exc)
        else:
            import atexit

            atexit.register(_SERVER.stop)
    if _SERVER is None:
        raise PgUnavailable(_REASON)
    return _SERVER


_SCHEMAS = iter(range(1, 1 << 30))


def fresh_dsn() -> str:
    """A DSN on the shared server whose tables live in a new, empty schema (one per store)."""
    import psycopg

    server = shared_server()
    schema = f"t{os.getpid()}_{next(_SCHEMAS)}"
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{server.dsn} options='-c search_path={schema}'"


@contextlib.contextmanager
def pg_on_namespace_hosts(hosts: int = 3) -> Iterator[tuple[Any, PgServer]]:
    """Network-namespace hosts h1..hN (bench/netns.py) with a throw-away PostgreSQL on h1,
    listening on h1's address; skips the test, with the reason, when either cannot be made.
    The server is stopped and the hosts removed at the end."""
    import pytest

    from bench.netns import Cluster, why_not

    reason = why_not()
    if reason:
        pytest.skip(f"no namespace hosts: {reason}")
    with Cluster(hosts) as cluster:
        try:
            server = start_server(listen=cluster.host("h1").addr, wrap=lambda argv: cluster.on("h1", argv))
        except PgUnavailable as exc:
            pytest.skip(f"PostgreSQL store not tested: {exc}")
        try:
            yield cluster, server
        finally:
            server.stop()
