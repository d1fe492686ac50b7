"""Makes several "hosts" on one Linux machine for multi-host MPI runs: network namespaces on a bridge.

Each host is a network namespace with one link (`eth0`, 10.R.S.i/24) to a bridge that lives in
a namespace of its own, so nothing the hosts send can reach any other network. A process is
started on a host by `ip netns exec NS unshare --uts --ipc --mount` with the host's name set as
its hostname (so ranks report `h2`, not the machine's name), an IPC namespace of its own and
optional bind mounts of its own (`binds={"h3": [(src, dst)]}`: a file missing or different there).

- `Cluster(n)` makes hosts h1..hn (`with Cluster(3) as c:` removes everything again);
  `delays={"h2": 0.05}` puts a userspace forwarder on h2's link that holds every frame for half
  the added round trip in each direction (this kernel has no netem): h2's link is then a pair of
  TAP devices instead of a veth pair.
- `c.launcher()` writes a script for MPICH's hydra (`-launcher ssh -launcher-exec SCRIPT`) or
  Open MPI (`--mca plm_rsh_agent SCRIPT`) that runs the remote command on the named host;
  `c.hostfile(slots)` writes a hostfile of the hosts' addresses; `c.mpiexec(...)` the whole
  command line for MPICH with the coordinator's host as the launching host.
- `c.counters(host)` reads the link's byte counters; `c.cut(host)` takes a link down;
  `c.pids(host)` lists the processes still running on a host; `c.kill(host)` kills them.
- `sweep()` removes namespaces a dead process of ours left behind (run at every start).

Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN), iproute2 and util-linux's unshare; `why_not()`
says in one line why hosts cannot be made here. The forwarder runs as
`python -m bench.netns forward ...` (see `_forward`).
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import re
import select
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

PREFIX = "sfnet-"  # namespaces are PREFIX<pid of the maker>-<name>
ROOT = Path(__file__).resolve().parent.parent
_NAME = re.compile(rf"^{re.escape(PREFIX)}(\d+)-")
CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
_SEQ = itertools.count(1)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def why_not() -> str | None:
    """None if hosts can be made here, else the reason in one line."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing (no TAP devices)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"`ip netns add` failed: {r.stderr.strip()}"
    try:
        r = subprocess.run(
            ["ip", "netns", "exec", probe, *Cluster.UNSHARE, "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if r.returncode != 0:
            return f"`{' '.join(Cluster.UNSHARE)}` failed in a namespace: {r.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_pids(ns: str) -> None:
    r = _ip("netns", "pids", ns, check=False)
    for pid in r.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def _namespaces() -> list[str]:
    r = _ip("netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def sweep() -> list[str]:
    """Remove the namespaces (and kill their processes) that a dead maker left behind."""
    gone = []
    for ns in _namespaces():
        m = _NAME.match(ns)
        if m and not _alive(int(m.group(1))):
            _kill_pids(ns)
            _ip("netns", "del", ns, check=False)
            gone.append(ns)
    return gone


@dataclass(frozen=True)
class Host:
    name: str  # h1, h2, ...
    ns: str  # the network namespace
    addr: str  # its address on the bridge
    delay_s: float = 0.0  # added round trip on its link


class Cluster:
    """N hosts on one bridge; everything made is removed by close() (also on a failed start)."""

    DEV = "eth0"

    def __init__(
        self,
        n: int = 3,
        *,
        delays: dict[str, float] | None = None,
        workdir: Path | None = None,
        binds: dict[str, list[tuple[str, str]]] | None = None,
    ) -> None:
        if n < 1 or n > 200:
            raise ValueError("1 <= n <= 200 hosts")
        pid = os.getpid()
        base = f"{PREFIX}{pid}-{next(_SEQ)}-"  # several clusters of one process never collide
        self._own_workdir = workdir is None  # ours to remove at close()
        self.workdir = Path(workdir or f"/tmp/{base.rstrip('-')}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        # A /24 of 10.0.0.0/8 picked from the pid: isolated anyway, but distinct per maker.
        net = f"10.{200 + pid % 50}.{(pid // 50) % 250}"
        self.switch = base + "sw"
        self.hosts = [
            Host(f"h{i}", f"{base}h{i}", f"{net}.{i}", (delays or {}).get(f"h{i}", 0.0))
            for i in range(1, n + 1)
        ]
        unknown = (set(delays or {}) | set(binds or {})) - {h.name for h in self.hosts}
        if unknown:
            raise ValueError(f"delays or binds for unknown hosts: {sorted(unknown)}")
        # Per-host bind mounts (SRC over DST, seen by that host's processes only): a host without
        # a file, or with another version of it, as without a shared filesystem.
        self.binds = {h.name: list((binds or {}).get(h.name, [])) for h in self.hosts}
        self._forwarders: dict[str, subprocess.Popen] = {}
        self._made: list[str] = []

    # ------------------------------------------------------------------ set-up and removal

    def __enter__(self) -> "Cluster":
        try:
            self.up()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def up(self) -> None:
        sweep()
        for ns in [self.switch] + [h.ns for h in self.hosts]:
            _ip("netns", "add", ns)
            self._made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for h in self.hosts:
            port = f"p-{h.name}"
            if h.delay_s > 0:
                self._start_forwarder(h, port)
            else:
                _ip(
                    "link",
                    "add",
                    self.DEV,
                    "netns",
                    h.ns,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    port,
                    "netns",
                    self.switch,
                )
            _ip("-n", self.switch, "link", "set", port, "master", "br0")
            _ip("-n", self.switch, "link", "set", port, "up")
            _ip("-n", h.ns, "addr", "add", f"{h.addr}/24", "dev", self.DEV)
            _ip("-n", h.ns, "link", "set", self.DEV, "up")

    def _start_forwarder(self, h: Host, port: str) -> None:
        cmd = [
            sys.executable,
            "-m",
            "bench.netns",
            "forward",
            f"{h.ns}:{self.DEV}",
            f"{self.switch}:{port}",
            str(h.delay_s / 2),
        ]
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self._forwarders[h.name] = proc
        line = proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(
                f"delay forwarder for {h.name} did not start: {line} {proc.stderr.read()[-2000:]}"
            )

    def close(self) -> None:
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        for proc in self._forwarders.values():
            proc.kill()
            proc.wait(timeout=10)
        self._forwarders.clear()
        for ns in reversed(self._made):
            _kill_pids(ns)
        for ns in reversed(self._made):
            _ip("netns", "del", ns, check=False)
        self._made.clear()

    # ------------------------------------------------------------------ use

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def on(self, name: str, argv: list[str]) -> list[str]:
        """argv run on host `name` (its network, hostname and IPC namespace)."""
        h = self.host(name)
        return [
            "ip",
            "netns",
            "exec",
            h.ns,
            *self.UNSHARE,
            "sh",
            "-c",
            self._mounts(name) + 'hostname "$0" && exec "$@"',
            h.name,
            *argv,
        ]

    UNSHARE = ("unshare", "--uts", "--ipc", "--mount", "--propagation", "private")

    def _mounts(self, name: str) -> str:
        return "".join(
            f"mount --bind {shlex.quote(src)} {shlex.quote(dst)} && " for src, dst in self.binds[name]
        )

    def launcher(self) -> Path:
        """A launcher script for hydra's and Open MPI's ssh launchers: `SCRIPT [-opts] HOST CMD...`
        runs CMD on HOST (a host's name or address). Its calls are logged to launcher.log."""
        path = self.workdir / "launcher.sh"
        cases = "\n".join(
            f"  {h.addr}|{h.name}) ns={h.ns}; name={h.name}; pre={shlex.quote(self._mounts(h.name))};;"
            for h in self.hosts
        )
        path.write_text(f"""#!/bin/sh
# made by bench/netns.py: run a command "on" one of the namespace hosts (like ssh HOST CMD)
echo "$@" >> {self.workdir}/launcher.log
while [ "${{1#-}}" != "$1" ]; do shift; done
host=$1; shift
case "$host" in
{cases}
  *) echo "launcher: unknown host $host" >&2; exit 255;;
esac
exec ip netns exec "$ns" {" ".join(self.UNSHARE)} sh -c "$pre"'hostname "$0" && eval "$*"' "$name" "$@"
""")
        path.chmod(0o755)
        return path

    def hostfile(self, slots: dict[str, int], *, style: str = "mpich") -> Path:
        """One line per host with its slots, by address: `ADDR:N` (MPICH) or `ADDR slots=N` (Open MPI)."""
        path = self.workdir / f"hostfile.{style}"
        fmt = "{addr}:{n}" if style == "mpich" else "{addr} slots={n}"
        path.write_text(
            "".join(fmt.format(addr=self.host(name).addr, n=n) + "\n" for name, n in slots.items())
        )
        return path

    def mpiexec(self, mpiexec: str, slots: dict[str, int], argv: list[str]) -> list[str]:
        """MPICH's hydra started on the first host of `slots`, its proxies on the others through the
        launcher, the control connection on the hosts' link (-iface)."""
        first = next(iter(slots))
        n = sum(slots.values())
        return self.on(
            first,
            [
                mpiexec,
                "-launcher",
                "ssh",
                "-launcher-exec",
                str(self.launcher()),
                "-f",
                str(self.hostfile(slots)),
                "-iface",
                self.DEV,
                "-n",
                str(n),
                *argv,
            ],
        )

    def ompi_mpiexec(self, mpiexec: str, slots: dict[str, int], argv: list[str]) -> list[str]:
        """Open MPI's mpiexec (PRRTE) on the first host of `slots`, its daemons on the others through
        the launcher (plm_ssh_agent), daemons and MPI traffic on the hosts' link, TCP between hosts."""
        first = next(iter(slots))
        n = sum(slots.values())
        return self.on(
            first,
            [
                mpiexec,
                "--hostfile",
                str(self.hostfile(slots, style="ompi")),
                "-n",
                str(n),
                "--prtemca",
                "plm_ssh_agent",
                str(self.launcher()),
                "--prtemca",
                "oob_tcp_if_include",
                self.DEV,
                "--mca",
                "btl_tcp_if_include",
                self.DEV,
                "--mca",
                "pml",
                "ob1",
                "--mca",
                "btl",
                "self,sm,tcp",
                "--bind-to",
                "none",
                *argv,
            ],
        )

    def counters(self, name: str) -> tuple[int, int]:
        """(rx_bytes, tx_bytes) of the host's link, as the host sees it."""
        h = self.host(name)
        r = _ip("-n", h.ns, "-s", "-j", "link", "show", "dev", self.DEV)
        stats = json.loads(r.stdout)[0]["stats64"]
        return int(stats["rx"]["bytes"]), int(stats["tx"]["bytes"])

    def cut(self, name: str) -> None:
        _ip("-n", self.host(name).ns, "link", "set", self.DEV, "down")

    def mend(self, name: str) -> None:
        h = self.host(name)
        _ip("-n", h.ns, "link", "set", self.DEV, "up")

    def pids(self, name: str) -> list[int]:
        """Processes running on the host (hydra proxies, ranks)."""
        r = _ip("netns", "pids", self.host(name).ns, check=False)
        return [int(p) for p in r.stdout.split()]

    def kill(self, name: str, sig: int = signal.SIGKILL, *, match: str | None = None) -> list[int]:
        """Signal the host's processes (only those whose command line contains `match`). All are
        found first and then signalled in one go: signalled one by one, between reads of
        /proc, the first one's death had hydra end its siblings before they were reached
        (one of a host's two ranks "killed", a CI failure)."""
        chosen = []
        for pid in self.pids(name):
            if match is not None:
                try:
                    if match not in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode():
                        continue
                except OSError:
                    continue
            chosen.append(pid)
        hit = []
        for pid in chosen:
            try:
                os.kill(pid, sig)
                hit.append(pid)
            except ProcessLookupError:
                pass
        return hit


# ---------------------------------------------------------------------------------- the forwarder


def _setns(ns: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{ns}" if "/" not in ns else ns, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
    finally:
        os.close(fd)


def _tap(ns: str, name: str) -> int:
    """A TAP device `name` made in namespace `ns`; it lives as long as the returned fd."""
    _setns(ns)
    fd = os.open("/dev/net/tun", os.O_RDWR)
    import fcntl

    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    os.set_blocking(fd, False)
    return fd


def _forward(a: str, b: str, one_way_s: float) -> None:
    """Hold every frame between TAP devices a and b ("NS:DEV") for one_way_s, in order, both ways."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    fa = _tap(*a.split(":"))
    fb = _tap(*b.split(":"))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.setns(home, CLONE_NEWNET)  # back home: `ip netns pids` of the hosts does not list us
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    queues: dict[int, deque[tuple[float, bytes]]] = {fa: deque(), fb: deque()}  # frames to write to fd
    other = {fa: fb, fb: fa}
    while True:
        now = time.monotonic()
        due = [q[0][0] for q in queues.values() if q]
        timeout = max(0.0, min(due) - now) if due else 1.0
        readable, _, _ = select.select([fa, fb], [], [], timeout)
        now = time.monotonic()
        for fd in readable:
            for _ in range(64):
                try:
                    frame = os.read(fd, 65536)
                except (BlockingIOError, OSError):
                    break
                queues[other[fd]].append((now + one_way_s, frame))
        for fd, q in queues.items():
            while q and q[0][0] <= now:
                try:
                    os.write(fd, q.popleft()[1])
                except OSError:
                    pass  # the link is down (cut): the frame is lost, as on a wire


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "forward":
        _forward(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        raise SystemExit("usage: python -m bench.netns forward NS:DEV NS:DEV ONE_WAY_S")
