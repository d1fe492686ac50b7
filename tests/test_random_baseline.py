"""Quick tests of the random-mutation baseline: the havoc mutators, splicing, and short end-to-end runs."""

from __future__ import annotations

import itertools
import random
import textwrap
from pathlib import Path
from typing import Callable

import pytest

from bench import random_baseline as rb

_counter = itertools.count()


@pytest.fixture
def make_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], str]:
    """Write a uniquely named target module; returns its "module:target" spec."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:
        name = f"sf_baseline_target_{next(_counter)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        return f"{name}:target"

    return write


def test_flip_bit_changes_exactly_one_bit() -> None:
    rng = random.Random(1)
    for _ in range(200):
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 20)))
        buf = bytearray(data)
        rb.flip_bit(buf, rng)
        assert sum(bin(a ^ b).count("1") for a, b in zip(data, buf)) == 1


def test_value_mutators_keep_length_and_use_interesting_values() -> None:
    rng = random.Random(2)
    for _ in range(200):
        buf = bytearray(8)
        rb.set_interesting_32(buf, rng)
        assert len(buf) == 8
        words = {int.from_bytes(buf[i : i + 4], order) for i in range(5) for order in ("little", "big")}
        assert words & {v % (1 << 32) for v in rb.INTERESTING_32}
        buf = bytearray(b"\x05")
        rb.random_byte(buf, rng)
        assert buf != b"\x05"  # random_byte always changes the byte
        rb.arith_8(buf, rng)
        assert len(buf) == 1
    one = bytearray(b"\x01")
    rb.set_interesting_16(one, rng)  # too short: no-op
    rb.set_interesting_32(one, rng)
    rb.delete_block(one, rng)
    rb.overwrite_block(one, rng)
    assert one == b"\x01"


def test_block_mutators_change_length_as_advertised() -> None:
    rng = random.Random(3)
    for _ in range(200):
        data = bytes(range(rng.randint(2, 40)))
        buf = bytearray(data)
        rb.delete_block(buf, rng)
        assert 1 <= len(buf) < len(data)
        buf = bytearray(data)
        rb.insert_block(buf, rng)
        assert len(data) < len(buf) <= len(data) + 32
        buf = bytearray(data)
        rb.overwrite_block(buf, rng)
        assert len(buf) == len(data)
    empty = bytearray()
    rb.insert_block(empty, rng)  # inserting into nothing works (random byte run)
    assert 1 <= len(empty) <= 32


def test_havoc_and_splice() -> None:
    rng = random.Random(4)
    outs = {rb.havoc(b"\x00", rng, max_len=16) for _ in range(500)}
    assert all(len(o) <= 16 for o in outs)
    assert len(outs) > 100 and any(len(o) >= 8 for o in outs)  # seeds grow out of b"\x00"
    for _ in range(100):
        s = rb.splice(b"aaaa", b"bbbbbb", rng)
        cut = s.count(b"a")
        assert s == b"a" * cut + b"bbbbbb"[cut:]


def test_exception_name_from_traceback() -> None:
    detail = "Traceback (most recent call last):\n  File \"x.py\", line 1\nexamples.tlv.TlvNestingBug: tlv: boom\n"
    assert rb._exception_name(detail) == "examples.tlv.TlvNestingBug"


def test_guided_baseline_finds_a_shallow_bug_and_reports(make_target: Callable[[str], str]) -> None:
    spec = make_target("""
        class Shallow(Exception):
            pass

        def target(data):
            if len(data) >= 2 and data[0] == 1:
                if data[1] == 0x80:
                    raise Shallow("found")
    """)
    r = rb.run_baseline([spec], 0.5, guided=True, seed=0)
    t = r.targets[0]
    assert t.first_crash is not None and t.first_crash.exception.endswith(".Shallow")
    assert 0 <= t.first_crash.found_s <= r.wall_s and 1 <= t.first_crash.execs <= t.execs
    assert t.corpus > 1 and t.edges and r.edges == t.edges >= 3
    assert r.execs == t.execs > 100 and r.execs_per_s > 0 and r.mode == "guided"
    assert 0.45 <= r.wall_s < 1.5
    assert r.to_dict()["targets"][0]["crashes"][0]["input_hex"]


def test_blind_baselines_run_on_the_demo_targets() -> None:
    targets = rb.demo_targets()
    r = rb.run_baseline(targets, 0.3, guided=False, seed=1)
    assert [t.target for t in r.targets] == targets
    assert all(t.corpus == 1 and t.execs > 50 and t.edges for t in r.targets)  # blind: never grows
    assert r.edges is not None and r.edges >= max(t.edges or 0 for t in r.targets)
    plain = rb.run_baseline(targets[:1], 0.2, guided=False, plain=True)
    assert plain.mode == "blind-plain" and plain.edges is None and plain.targets[0].edges is None
    with pytest.raises(ValueError):
        rb.run_baseline(targets, 0.1, guided=True, plain=True)
