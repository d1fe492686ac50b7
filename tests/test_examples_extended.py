"""Tests for the extended example targets (examples/keyvalue.py, examples/opcode_vm.py).

They are plain Python (run without the engine, raise only their planted bugs), their bugs
are real, and the in-process concolic engine makes progress on them from ``b"\\x00"``.
The deep keyvalue bug takes the campaign tens of seconds, so it is not required here.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import random
import time
import tomllib
from pathlib import Path

import pytest

from examples import keyvalue, opcode_vm
from symfence.coordinator import config as config_mod
from symfence.protocol.coverage import CoverageMap
from symfence.worker.concolic.engine import ConcolicEngine
from symfence.worker.concolic.instrument import load_target
from symfence.worker.executors.base import ExitKind, Task

ROOT = Path(__file__).resolve().parent.parent
OPTIONS = {"exec_timeout_s": 1.0, "solver_timeout_ms": 200, "max_branches": 2000, "max_candidates": 64}

KEYVALUE_CONFIGS = [
    b"",
    b"\n\n# a comment\n",
    b"name=web\\x41\\n\\t\\\\ 1\nport=8080\nmode=rw\ntimeout=250ms\n",
    b"[server]\nuser=www_data\nroot=/srv//www/./static\nworkers=8\ntimeout=30s\n",
    b"[debug]\nlevel=3\nlisten=tcp://127.0.0.1:0x1f90,9\n",  # unprivileged port: no schedule
    b"[debug]\nlevel=2\nlisten=udp://10.0.0.1:0x35,6\n[server]\nport=53\n",  # 6 retries fit
    b"[debug]\nlevel=9\nlisten=tcp://0.0.0.0:0x50,9\n",  # rejected: all interfaces
    b"[debug]\nlisten=tcp://1.2.3.4:0x50,9\n",  # rejected: level 0
    b"root=/a/../b\n",  # rejected
]

VM_PROGRAMS = [
    b"",
    bytes.fromhex("0105 0300 21 0203 01 3104 0101 32f8 40 ff".replace(" ", "")),  # store, loop, out
    bytes.fromhex("0603 0101 40 33fb ff".replace(" ", "")),  # DJNZ loop
    bytes.fromhex("02ffff 0101 10 3402 0000 f003 f006 f000 ff".replace(" ", "")),  # overflow, syscalls
    bytes.fromhex("30fe".replace(" ", "")),  # JMP to itself: stopped at MAX_STEPS
    bytes.fromhex("f008 f007".replace(" ", "")),  # SYS 8 faults before SYS 7 runs
]


# -- plain Python: ordinary inputs run, crafted inputs raise the planted bugs ----------------


@pytest.mark.parametrize("data", KEYVALUE_CONFIGS)
def test_keyvalue_runs_ordinary_configurations(data: bytes) -> None:
    keyvalue.target(data)


@pytest.mark.parametrize("data", VM_PROGRAMS)
def test_opcode_vm_runs_ordinary_programs(data: bytes) -> None:
    opcode_vm.target(data)


def _mutants(rng: random.Random, bases: list[bytes], count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        buf = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 4)):
            if buf and rng.random() < 0.6:
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            else:
                buf[rng.randint(0, len(buf)):rng.randint(0, len(buf))] = bytes(
                    rng.randrange(256) for _ in range(rng.randrange(4)))
        out.append(bytes(buf))
    out += [bytes(rng.randrange(256) for _ in range(rng.randrange(32))) for _ in range(count)]
    return out


def test_random_and_mutated_inputs_raise_nothing_but_the_planted_bugs() -> None:
    rng = random.Random(2024)
    for data in _mutants(rng, KEYVALUE_CONFIGS, 1500):
        try:
            keyvalue.target(data)
        except keyvalue.RetryScheduleOverflow:  # a mutated retry count next to a listener
            assert b"[debug]" in data and b"listen=" in data
    for data in _mutants(rng, VM_PROGRAMS, 1500):
        try:
            opcode_vm.target(data)
        except opcode_vm.VmSyscallOutOfRange:
            assert b"\xf0\x07" in data  # SYS 7 is the only way to the planted bug


def test_keyvalue_bug_is_raised_by_a_crafted_configuration() -> None:
    with pytest.raises(keyvalue.RetryScheduleOverflow, match="7 retries"):
        keyvalue.target(b"name=x\n[debug]\nlevel=2\nlisten=tcp://127.0.0.1:0x50,7\n")
    with pytest.raises(keyvalue.RetryScheduleOverflow):  # what the concolic search builds
        keyvalue.target(b"[debug]\nlevel=8\nlisten=tcp://1.0.0.0:0x0,7")
    keyvalue.target(b"[debug]\nlevel=2\nlisten=tcp://127.0.0.1:0x50,6\n")  # fits the table


def test_opcode_vm_bug_is_raised_by_a_crafted_program() -> None:
    with pytest.raises(opcode_vm.VmSyscallOutOfRange, match="SYS 7"):
        opcode_vm.target(b"\xf0\x07")
    with pytest.raises(opcode_vm.VmSyscallOutOfRange):
        opcode_vm.target(bytes.fromhex("0105 0105 10 f007".replace(" ", "")))


def test_planted_bugs_are_distinct_exception_types() -> None:
    from examples import checksum, magic_header, tlv

    types = [keyvalue.RetryScheduleOverflow, opcode_vm.VmSyscallOutOfRange,
             checksum.ChecksumBug, magic_header.MagicHeaderBug, tlv.TlvNestingBug]
    assert len({t.__name__ for t in types}) == len(types)
    assert all(issubclass(t, Exception) and t is not Exception for t in types)


def test_extended_config_names_the_concolic_and_new_targets() -> None:
    cfg = config_mod.load(ROOT / "configs" / "extended.toml")
    base = tomllib.loads((ROOT / "configs" / "concolic.toml").read_text())["campaign"]["targets"]
    targets = cfg["campaign.targets"]
    assert targets[: len(base)] == base
    assert {"examples.keyvalue:target", "examples.opcode_vm:target"} <= set(targets)
    assert cfg["campaign.duration_s"] == 60 and cfg["campaign.ranks"] == 3
    for spec in targets:
        load_target(spec)  # every target imports and instruments


# -- the concolic engine makes progress ------------------------------------------------------


def search(target: str, max_tasks: int, budget_s: float):
    """The coordinator's search in one process: seed first, then new edges, lower bound, shorter.

    Returns (tasks run, edges after each task, kept inputs, first crash detail or "").
    """
    engine = ConcolicEngine()
    coverage = CoverageMap()
    seq = itertools.count()
    queue = [((0, 0, 0, next(seq)), b"\x00", 0)]
    kept: list[bytes] = []
    edges: list[int] = []
    start = time.process_time()  # CPU time of this process (the engine runs here): load does not shrink it
    tasks = 0
    while queue and tasks < max_tasks and time.process_time() - start < budget_s:
        _, data, bound = heapq.heappop(queue)
        work_id = hashlib.sha256(data + bound.to_bytes(4, "big")).hexdigest()
        outcome = engine.run_task(Task("token", work_id, data, target, bound, OPTIONS))
        tasks += 1
        assert outcome.status in (ExitKind.OK, ExitKind.CRASH), outcome.error
        coverage.merge(outcome.trace)
        for child in outcome.candidates:
            if child.kind is ExitKind.CRASH:
                return tasks, edges, kept, child.detail
            bits = coverage.merge(child.trace)
            if bits and child.kind is ExitKind.OK:
                kept.append(child.data)
                heapq.heappush(queue, ((1, -bits, child.bound, next(seq)), child.data, child.bound))
        edges.append(len(coverage.edges_found()))
    return tasks, edges, kept, ""


def test_engine_makes_progress_on_keyvalue() -> None:
    tasks, edges, kept, crash = search("examples.keyvalue:target", max_tasks=60, budget_s=8)
    assert not crash  # the deep bug needs far more than 60 tasks
    assert tasks >= 20 and edges[-1] > 3 * edges[0] and edges[-1] >= 60
    assert len(kept) >= 40  # many paths: the search keeps finding new coverage
    # the scanner's keywords are solved from a single zero byte, including the debug section
    found = b"\n".join(kept)
    for word in (b"name=", b"port=", b"[debug]", b"[server]"):
        assert word in found, word


def test_engine_finds_the_opcode_vm_bug_in_a_few_generations() -> None:
    tasks, edges, kept, crash = search("examples.opcode_vm:target", max_tasks=150, budget_s=10)
    assert "VmSyscallOutOfRange" in crash, (tasks, edges[-1:], kept[-5:])
    assert edges[-1] > 2 * edges[0]
