"""The AFL++ forkserver oracle against afl-showmap: identical maps on a corpus, the same verdicts."""

from __future__ import annotations

import os

from symfence.protocol.coverage import bucket
from symfence.worker.native.base import RunKind
from symfence.worker.native.forkserver import ForkserverOracle, dumped_map_size, map_size_of
from symfence.worker.native.showmap import ShowmapOracle, parse_showmap
from tests.native_support import built, needs_afl, needs_cc

pytestmark = [needs_afl, needs_cc]

HUMAN = {1: 1, 2: 2, 4: 3, 8: 4, 16: 5, 32: 6, 64: 7, 128: 8}
CORPUS = {
    "record": [bytes(32), b"SFRC" + bytes(28), b"SFRC\x42\xee\xff\xc0\x02\x42!!",  # crash
               b"SFRC\x42\xee\xff\xc0\x03\x00abc", b"SFRC\xd5\xee\x05\x10\x04\x00LOOX", b"x",
               b"SFRC\xd5\xee\x05\x10\x04\x00LOOP"],  # hang
    "tlv": [b"", b"P\x00", b"C\x08C\x06I\x04\x0b\xad\xf0\x0d", b"C\x08C\x06I\x04\x0b\xad\xf0\x0c",
            b"I\x04\x00\x00\x00\x01P\x01x" * 3, b"C\x04P\x02ab", b"Z"],
}


def test_forkserver_maps_equal_afl_showmap_on_a_corpus():
    for name, inputs in CORPUS.items():
        binary = str(built() / f"{name}.afl")
        fsrv = ForkserverOracle(binary, exec_timeout_s=0.5)
        raw = ShowmapOracle(binary, exec_timeout_s=0.5, raw=True)
        classified = ShowmapOracle(binary, exec_timeout_s=0.5, raw=False)
        try:
            for data in inputs:
                a, b, c = fsrv.run(data), raw.run(data), classified.run(data)
                assert a.trace == b.trace, (name, data)
                assert a.trace, (name, data)
                # AFL's hit-count buckets of the forkserver's raw counts = afl-showmap's own classes
                # (which it prints as 1..8 for the buckets 1, 2, 4, ..., 128). afl-showmap 4.04c
                # classifies whole 8-byte words only, so the last map_size % 8 entries of an
                # odd-sized PCGUARD map are left out of its classified output.
                whole = (dumped_map_size(binary, {}) // 8) * 8
                assert {i: HUMAN[bucket(n)] for i, n in a.trace.items() if i < whole} == \
                    {i: n for i, n in c.trace.items() if i < whole}, (name, data)
                assert a.kind is b.kind, (name, data)
                assert a.detail.split(":")[0] == b.detail.split(":")[0]
            assert fsrv.starts == 1  # one forkserver for the whole corpus
        finally:
            fsrv.close()
            raw.close()
            classified.close()


def test_verdicts_crash_hang_ok():
    binary = str(built() / "record.afl")
    fsrv = ForkserverOracle(binary, exec_timeout_s=0.3)
    try:
        assert fsrv.run(bytes(32)).kind is RunKind.OK
        crash = fsrv.run(b"SFRC\x42\xee\xff\xc0\x02\x42!!")
        assert crash.kind is RunKind.CRASH and crash.signal == 11 and crash.detail.startswith("SIGSEGV")
        assert fsrv.run(b"SFRC\xd5\xee\x05\x10\x04\x00LOOP").kind is RunKind.HANG
        assert fsrv.run(b"SFRC" + bytes(28)).kind is RunKind.OK  # the forkserver survived the hang
        assert fsrv.run(bytes(32)).exit_code == 2
    finally:
        fsrv.close()
    assert not os.path.exists(fsrv.input_path)


def test_forkserver_refuses_a_plain_build():
    import pytest

    from symfence.worker.native.base import NativeError

    oracle = ForkserverOracle(str(built() / "record"), exec_timeout_s=0.3)
    try:
        with pytest.raises(NativeError, match="forkserver"):
            oracle.run(b"x")
    finally:
        oracle.close()


def test_handshake_helpers():
    assert map_size_of(0x80000001 | 0x40000000 | ((65536 - 1) << 1)) == 65536
    assert map_size_of(0) is None
    assert parse_showmap("000001:1\n000020:3\n") == {1: 1, 20: 3}
