"""The host check (coordinator/hosts.py, worker/hostcheck.py) and log forwarding (worker/logforward.py)."""

from __future__ import annotations

import hashlib

from symfence.coordinator.config import parse
from symfence.coordinator.hosts import MAX_REMOTE_LOGS, HostChecks, manifest
from symfence.protocol.codec import decode_control, encode
from symfence.protocol.ids import Rank
from symfence.protocol.messages import Control, ControlKind
from symfence.worker.hostcheck import verify
from symfence.worker.logforward import BURST, MAX_FIELDS, MAX_TEXT, LogForwarder


def test_verify_names_the_first_missing_or_different_file(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_bytes(b"x")
    b.write_bytes(b"y")
    files = {str(a): hashlib.sha256(b"x").hexdigest(), str(b): hashlib.sha256(b"y").hexdigest()}
    assert verify(files) is None
    b.write_bytes(b"z")
    assert verify(files) == (2, "differs")
    a.unlink()
    assert verify(files) == (1, "missing")


def test_manifest_lists_the_target_package_sources(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "t.py").write_text("def target(data): pass\n")
    monkeypatch.chdir(tmp_path)
    cfg = parse({"campaign": {"executor": "concolic", "targets": ["mypkg.t:target"]}})
    files = manifest(cfg)
    assert files == {
        str(pkg.resolve() / "__init__.py"): hashlib.sha256(b"").hexdigest(),
        str(pkg.resolve() / "t.py"): hashlib.sha256(b"def target(data): pass\n").hexdigest(),
    }
    assert manifest(parse({"campaign": {"executor": "synthetic"}})) == {}


def test_a_mismatch_is_one_line_naming_host_and_file():
    checks = HostChecks({"/x/b.py": "ab" * 32, "/x/a.py": "cd" * 32})
    checks.hosts[Rank(1)] = "h2"
    checks.on_checked(Rank(1), {"host": "h2", "files_checked": 2, "bad_file": 0, "why": ""})
    assert checks.problem is None and checks.pending({Rank(1), Rank(2)}) == {Rank(2)}
    checks.on_checked(Rank(2), {"host": "h3", "files_checked": 2, "bad_file": 2, "why": "missing"})
    assert checks.problem == "host h3 (rank 2): /x/b.py is missing"


def test_forwarded_events_are_bounded_rate_limited_and_pass_the_codec():
    sent, now = [], [0.0]
    fwd = LogForwarder(sent.append, clock=lambda: now[0])
    fields = {f"k{i}": i for i in range(40)}
    event = {
        "event": "work.refused",
        "level": "warning",
        "rank": 3,
        "ts": 1.0,
        "detail": "x" * 10_000,
        "neg": -5,
        "obj": object(),
        **fields,
    }
    assert fwd(None, "warning", dict(event)) == event  # the local log keeps everything
    info = sent[0]
    assert len(info) <= MAX_FIELDS and info["event"] == "work.refused" and "rank" not in info
    assert len(info["detail"]) == MAX_TEXT and info["neg"] == "-5"
    frame = encode(Control(ControlKind.LOG, info=info))
    assert decode_control(frame).info == info  # what a worker sends is what rank 0 accepts
    fwd(None, "info", {"event": "task.cancelled", "level": "info"})
    assert len(sent) == 1  # info events stay local
    for _ in range(200):
        fwd(None, "error", {"event": "e", "level": "error"})
    assert len(sent) == BURST  # the bucket: 50 at once ...
    now[0] = 1.0
    fwd(None, "error", {"event": "e", "level": "error"})
    assert sent[-1]["dropped"] == 151  # ... and what it refused is reported with the next one


def test_rank_0_writes_a_bounded_number_of_forwarded_events(monkeypatch):
    import structlog

    checks = HostChecks({})
    checks.hosts[Rank(1)] = "h2"
    with structlog.testing.capture_logs() as logs:
        for _ in range(MAX_REMOTE_LOGS + 5):
            checks.on_log(Rank(1), {"event": "coverage.bad_delta", "level": "warning", "error": "bad"})
    assert len(logs) == MAX_REMOTE_LOGS and checks.remote_logs[Rank(1)] == MAX_REMOTE_LOGS + 5
    assert (
        logs[0]["event"] == "worker.log" and logs[0]["host"] == "h2" and logs[0]["fields"] == {"error": "bad"}
    )


def test_manifest_lists_native_binaries_and_their_afl_builds(tmp_path):
    target, afl = tmp_path / "parse", tmp_path / "parse.afl"
    target.write_bytes(b"\x7fELF target")
    afl.write_bytes(b"\x7fELF afl build")
    cfg = parse({"campaign": {"executor": "native", "targets": [str(target)]},
                 "native": {"options": {"oracle": "forkserver"}}})
    assert manifest(cfg) == {str(target): hashlib.sha256(b"\x7fELF target").hexdigest(),
                             str(afl): hashlib.sha256(b"\x7fELF afl build").hexdigest()}
