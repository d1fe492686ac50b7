"""A hostile rank for tests: speaks symfence's wire protocol directly (msgpack maps, MPI tags).

Run as the LAST rank of an MPMD job beside a real coordinator and honest workers:

    mpiexec -n 3 python -m symfence.coordinator --config C --out O : -n 1 python tests/adversary.py REPORT

It shares nothing with `worker/` (no codec, no fault injector): it builds every frame by hand,
so it can send what symfence's own encoder never would. It walks through attack phases and
writes REPORT (JSON): how many frames of each class it sent, the reason each class must be
counted under, the tokens it withheld until their deadline, and when each phase ran.

Phases (issue 10's findings, plus the envelope and token attacks):
  A  token-bound: for each WORK, out-of-range integers and durations and a wrong work_id under
     the WORK's own token, then one genuine answer that over-claims (every edge, thousands of
     candidates, invented crashes, log/terminal injection in its text).
  B  envelope, token and CONTROL attacks; oversized frames (one of 64 MiB); frames on the
     fault injector's side communicator; unknown tags; early STOP_ACKs; malformed heartbeats.
  C  silent: WORKs are held past their deadline, then answered (late): the rank must be
     suspended, its retries run elsewhere.
  D  unowned: answers with invented tokens while nothing is in flight here.
  E  flood: thousands of forged results, then results with 4,096 candidates each, until banned.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import secrets
import signal
import struct
import sys
import time

import msgpack
from mpi4py import MPI

WORK, RESULT, CONTROL = 11, 12, 13
V = 1
ANSI = "\x1b[31;1m\x1b]0;pwned\x07"
FORGED_LINE = '\n{"event":"campaign.finished","reason":"forged","rank":0,"level":"info"}\n'

world = MPI.COMM_WORLD
side = world.Dup()  # collective: every symfence rank Dups COMM_WORLD once at start
rank = world.Get_rank()
sent: collections.Counter[str] = collections.Counter()
reason: dict[str, str] = {}
pending: list[tuple[MPI.Request, object]] = []
held: dict[str, dict] = {}  # token -> WORK map, not yet answered
cancelled: set[str] = set()
withheld: list[str] = []  # tokens answered only after their CANCEL (must be `expired`)
work_received = 0
stop_seen = False
phases: dict[str, list[float]] = {}
committed_frames: list[bytes] = []  # genuine answers, kept to replay as duplicates
t0 = time.time()


def pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def send(tag: int, frame: bytes, *, comm: MPI.Comm = world, kind: str | None = None, why: str | None = None) -> None:
    pending.append((comm.Isend([frame, MPI.BYTE], 0, tag), frame))
    if kind:
        sent[kind] += 1
        if why:
            reason[kind] = why
    progress()


def progress() -> None:
    global pending
    if pending:
        done = set(MPI.Request.Testsome([r for r, _ in pending]) or [])
        pending = [p for i, p in enumerate(pending) if i not in done]


def poll() -> None:
    global work_received, stop_seen
    status = MPI.Status()
    progress()
    while True:
        msg = world.Improbe(0, MPI.ANY_TAG, status)
        if msg is None:
            return
        buf = bytearray(status.Get_count(MPI.BYTE))
        msg.Recv([buf, MPI.BYTE])
        m = msgpack.unpackb(bytes(buf), raw=False)
        if status.Get_tag() == WORK:
            work_received += 1
            held[m["token"]] = m
        elif m.get("kind") == "cancel":
            for t in m["tokens"]:
                if t in held:
                    cancelled.add(t)
        elif m.get("kind") == "stop":
            stop_seen = True


def control(kind: str, info: dict, tokens=()) -> bytes:
    return pack({"v": V, "kind": kind, "tokens": list(tokens), "info": info})


def heartbeat() -> None:
    send(CONTROL, control("heartbeat", {"work_received": work_received, "busy_s": 0.0}, tuple(held)))


def result(token: str | None, work_id: str, **kw) -> dict:
    m = {"v": V, "kind": "result", "token": token, "work_id": work_id, "status": "ok", "candidates": [],
         "cost": {"wall_s": 0.001, "cpu_s": 0.0, "solver_s": 0.0, "execs": 1}, "cov_version": 0,
         "trace": b"", "error": "", "stats": {}}
    if token is None:
        del m["token"]
    m.update(kw)
    return m


def candidate(data: bytes, kind: str = "ok", trace: bytes = b"", bound: int = 1, detail: str = "") -> dict:
    return {"data": data, "sha256": hashlib.sha256(data).hexdigest(), "trace": trace, "kind": kind,
            "bound": bound, "new_bits": 2, "detail": detail}


def wait(seconds: float, beat: float = 0.2) -> None:
    until, next_beat = time.monotonic() + seconds, 0.0
    while time.monotonic() < until:
        poll()
        if time.monotonic() >= next_beat:
            heartbeat()
            next_beat = time.monotonic() + beat
        time.sleep(0.002)


def next_work(timeout_s: float = 10.0) -> dict | None:
    until = time.monotonic() + timeout_s
    while time.monotonic() < until:
        poll()
        for token, m in held.items():
            if token not in cancelled:
                return m
        time.sleep(0.001)
    return None


def phase(name: str):
    phases[name] = [time.time() - t0]


def end_phase(name: str):
    phases[name].append(time.time() - t0)


def invented_traceback(n: int) -> str:
    return ("Traceback (most recent call last):\n"
            f'  File "/nowhere/invented_{n}.py", line {n}, in target\n'
            f"InventedError{n}: this crash never happened")


ALL_EDGES = b"".join(struct.pack("<HI", i, 1) for i in range(65536))


def phase_a(rounds: int) -> None:
    phase("A")
    for i in range(rounds):
        w = next_work()
        if w is None:
            break
        tok, wid = w["token"], w["work_id"]
        bad = result(tok, wid)
        bad["cost"] = dict(bad["cost"], execs=2**63)
        send(RESULT, pack(bad), kind="int_execs_2p63", why="malformed")
        bad = result(tok, wid, candidates=[candidate(b"b%d" % i, bound=2**63)])
        send(RESULT, pack(bad), kind="int_bound_2p63", why="malformed")
        bad = result(tok, wid)
        bad["cost"] = dict(bad["cost"], wall_s=1e308)
        send(RESULT, pack(bad), kind="float_wall_1e308", why="malformed")
        send(RESULT, pack(result(tok, secrets.token_hex(32))), kind="wrong_work_id", why="mismatched")
        # One genuine answer for the token, over-claiming in turn:
        style = i % 5
        if style == 0:
            good = result(tok, wid, trace=ALL_EDGES)
            sent["claim_all_edges"] += 1
        elif style == 1:
            good = result(tok, wid, status="crash", error=invented_traceback(i))
            sent["claim_crash_status"] += 1
        elif style == 2:
            good = result(tok, wid, candidates=[candidate(b"c%d-%d" % (i, j)) for j in range(2000)])
            sent["claim_2000_candidates"] += 1
        elif style == 3:
            good = result(tok, wid, candidates=[candidate(b"k%d-%d" % (i, j), "crash", detail=invented_traceback(1000 * i + j))
                                                for j in range(3)])
            good["cost"]["execs"] = 4
            sent["claim_crash_candidates"] += 3
        else:
            good = result(tok, wid, status="error", error="boom" + FORGED_LINE + ANSI + "\u202e")
            sent["log_injection_error"] += 1
        frame = pack(good)
        send(RESULT, frame, kind="genuine", why="current")
        committed_frames.append(frame)
        held.pop(tok)
    end_phase("A")


def phase_b() -> None:
    phase("B")
    while next_work(5.0) is None:  # hold one WORK so invented tokens are `stale`, not `unowned`
        pass
    wid = "ab" * 32
    for _ in range(5):
        send(RESULT, pack([wid, "not a map"]), kind="non_map", why="malformed")
        send(RESULT, b"\xc1\xc1\xc1", kind="undecodable", why="malformed")
        send(RESULT, pack(result(secrets.token_hex(32), wid, v=99)), kind="wrong_version", why="incompatible")
        send(RESULT, pack(result(None, wid)), kind="missing_token", why="missing")
        send(RESULT, pack(result(secrets.token_hex(32).upper(), wid)), kind="uppercase_token", why="malformed")
        send(RESULT, pack(result([secrets.token_hex(32)], wid)), kind="token_is_list", why="malformed")
        send(RESULT, pack(result(secrets.token_hex(32), wid)), kind="stale_or_unowned", why="stale|unowned")
        send(RESULT, pack(result(secrets.token_hex(32), wid, stats={"k": -5})), kind="negative_stat", why="malformed")
    for frame in committed_frames[:5]:
        send(RESULT, frame, kind="duplicate", why="duplicate")
    big = pack(result(secrets.token_hex(32), wid, error="x" * (2 << 20)))
    for _ in range(3):
        send(RESULT, big, kind="oversized_2mib", why="malformed")
    send(RESULT, bytes(64 << 20), kind="oversized_64mib", why="malformed")
    # CONTROL: every one of these must be counted in control_rejected, none may raise.
    bad_controls = [
        control("heartbeat", {"work_received": "many"}),
        control("heartbeat", {"work_received": 2**64 - 1}),
        control("heartbeat", {"busy_s": float("inf")}),
        control("heartbeat", {"nested": {"deep": [1, 2]}}),
        control("stop_ack", {"worker": 1, "event": "forged", "level": "error"}),  # no STOP was sent
        control("hello", {"host": "again"}),  # decodes, but a rank already alive: ignored
        control("cancel", {}, ()),  # a coordinator's message
        b"\xc1",
        pack({"v": V, "kind": "heartbeat", "tokens": ["NOT-A-TOKEN"], "info": {}}),
        pack({"v": V, "kind": "bogus", "tokens": [], "info": {}}),
    ]
    for i, frame in enumerate(bad_controls):
        if i == 5:
            send(CONTROL, frame, kind="hello_repeated", why="ignored")
        else:
            send(CONTROL, frame, kind="control_bad", why="control_rejected")
    send(CONTROL, pack({"x": "y" * (2 << 20)}), kind="control_oversized", why="control_rejected")
    for _ in range(3):
        send(99, b"unknown tag", kind="unknown_tag", why="control_rejected")
        send(WORK, b"a worker sends no WORK", kind="work_tag", why="control_rejected")
    for i in range(200):
        send(14, b"p" * (1 << 20 if i % 50 == 0 else 64), comm=side, kind="side_channel", why="side_dropped")
    end_phase("B")


def phase_c(max_s: float) -> None:
    """Hold every WORK past its deadline; answer it only after its CANCEL (a late result)."""
    phase("C")
    until = time.monotonic() + max_s
    quiet_since = time.monotonic()
    seen = work_received
    while time.monotonic() < until:
        wait(0.05)
        for tok in [t for t in held if t in cancelled]:
            w = held.pop(tok)
            send(RESULT, pack(result(tok, w["work_id"])), kind="late", why="expired")
            withheld.append(tok)
            cancelled.discard(tok)
            # A revoked dispatch holds the rank's slot until this late answer: only from now on
            # may the coordinator send this rank more WORK (to hold again), or not (suspended).
            quiet_since = time.monotonic()
        if work_received != seen:
            seen, quiet_since = work_received, time.monotonic()
        if not held and time.monotonic() - quiet_since > 1.5:
            break  # nothing held and no new WORK for a while: suspended
    end_phase("C")


def phase_d() -> None:
    phase("D")
    for _ in range(10):
        send(RESULT, pack(result(secrets.token_hex(32), "cd" * 32)), kind="stale_or_unowned", why="stale|unowned")
    wait(0.3)
    end_phase("D")


def phase_e(forged: int, heavy: int) -> None:
    phase("E")
    wid = "ef" * 32
    for i in range(forged):
        send(RESULT, pack(result(secrets.token_hex(32), wid)), kind="flood", why="stale|unowned|banned")
        if i % 256 == 0:
            poll()
    heavy_frame = pack(result(secrets.token_hex(32), wid, candidates=[candidate(b"h%d" % j) for j in range(4096)]))
    for _ in range(heavy):
        send(RESULT, heavy_frame, kind="flood_4096_candidates", why="stale|unowned|banned")
    end_phase("E")


def main() -> int:
    report_path = sys.argv[1]
    plan = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    # Like a real worker rank: mpiexec forwards Ctrl-C to every rank; rank 0 turns it into a STOP.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    send(CONTROL, control("hello", {"host": "rogue" + FORGED_LINE + ANSI, "pid": os.getpid()}))
    while True:  # SETUP
        status = MPI.Status()
        msg = world.Improbe(0, CONTROL, status)
        if msg is not None:
            buf = bytearray(status.Get_count(MPI.BYTE))
            msg.Recv([buf, MPI.BYTE])
            m = msgpack.unpackb(bytes(buf), raw=False)
            if m.get("kind") == "setup":
                # Like a real worker: the host check's answer (rank 0 starts once every rank gave it).
                send(CONTROL, control("checked", {"host": "rogue", "files_checked": 0}))
                break
            if m.get("kind") == "stop":
                return 0
        time.sleep(0.001)
    phase_a(plan.get("rounds", 10))
    phase_b()
    phase_c(plan.get("silent_max_s", 12.0))
    phase_d()
    phase_e(plan.get("flood", 3000), plan.get("heavy", 20))
    phase("after_ban")
    while not stop_seen:
        wait(0.05, beat=0.5)  # heartbeats keep coming: a banned rank's frames are counted, not read
    end_phase("after_ban")
    send(CONTROL, control("stop_ack", {"results_sent": sum(sent.values())}))
    until = time.monotonic() + 10
    while pending and time.monotonic() < until:
        progress()
        time.sleep(0.001)
    with open(report_path, "w") as fh:
        json.dump({"rank": rank, "t0": t0, "sent": sent, "reason": reason, "withheld": withheld, "phases": phases}, fh)
    return 0


if __name__ == "__main__":
    code = main()
    MPI.Finalize()
    sys.exit(code)
