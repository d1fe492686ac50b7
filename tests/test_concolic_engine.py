"""Tests for the in-process concolic engine: proxies, instrumentation, solving and search."""

from __future__ import annotations

import hashlib
import itertools
import random
import sys
import textwrap
import time
from collections import deque
from pathlib import Path
from typing import Callable

import pytest
import z3

from examples import checksum, magic_header, tlv
from symfence.protocol.coverage import CoverageMap, edges_from_sites
from symfence.worker.concolic.engine import ConcolicEngine
from symfence.worker.concolic.execution import execute
from symfence.worker.concolic.instrument import instrument_source, load_target
from symfence.worker.concolic.models import make_input, sym_from_bytes, sym_len
from symfence.worker.concolic.recorder import Recorder
from symfence.worker.concolic.symbolic import SymBool, SymInt, recording
from symfence.worker.executors.base import ExitKind, Outcome, Task

_counter = itertools.count()


@pytest.fixture
def make_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], str]:
    """Write a uniquely named target module; returns its "module:function" spec."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str, function: str = "target") -> str:
        name = f"sf_engine_target_{next(_counter)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        return f"{name}:{function}"

    return write


def run_task(engine: ConcolicEngine, target: str, data: bytes, bound: int = 0,
             work_id: str | None = None, **options: object) -> Outcome:
    work_id = work_id or hashlib.sha256(data + bound.to_bytes(4, "big")).hexdigest()
    return engine.run_task(Task("token", work_id, data, target, bound, options))


def explore(target: str, seed: bytes, max_tasks: int) -> tuple[int, int, str]:
    """Coverage-guided generational search like the coordinator's; (generations, tasks, crash)."""
    engine = ConcolicEngine()
    coverage = CoverageMap()
    queue = deque([(seed, 0, 0)])
    for tasks in range(1, max_tasks + 1):
        assert queue, "search ran out of inputs before finding the bug"
        data, bound, generation = queue.popleft()
        outcome = run_task(engine, target, data, bound)
        assert outcome.status is ExitKind.OK, outcome.error
        for child in outcome.candidates:
            if child.kind is ExitKind.CRASH:
                return generation + 1, tasks, child.detail
            if coverage.merge(child.trace):
                queue.append((child.data, child.bound, generation + 1))
    raise AssertionError(f"bug not found in {max_tasks} tasks")


# -- demo targets ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target, bug, seed, max_generations",
    [
        ("examples.magic_header:target", "MagicHeaderBug", b"\x00", 6),
        ("examples.magic_header:target", "MagicHeaderBug", bytes(16), 6),
        ("examples.tlv:target", "TlvNestingBug", b"\x00", 8),
        ("examples.tlv:target", "TlvNestingBug", bytes(16), 8),
        ("examples.checksum:target", "ChecksumBug", b"\x00", 4),
        ("examples.checksum:target", "ChecksumBug", bytes(16), 4),
    ],
)
def test_engine_finds_each_planted_bug_from_a_tiny_seed(target, bug, seed, max_generations) -> None:
    start = time.process_time()  # CPU time: the engine runs in this process; load does not count
    generations, tasks, detail = explore(target, seed, max_tasks=80)
    assert bug in detail
    assert generations <= max_generations
    assert time.process_time() - start < 20


@pytest.mark.parametrize("module", [magic_header, tlv, checksum])
def test_planted_bugs_survive_random_mutation_and_targets_run_without_the_engine(module) -> None:
    rng = random.Random(1234)
    for _ in range(3000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(24)))
        module.target(data)  # plain bytes, plain module: must not raise


def test_demo_bugs_raise_their_own_exceptions_on_plain_bytes() -> None:
    with pytest.raises(magic_header.MagicHeaderBug):
        magic_header.target(b"SYMF\x03\xef\xbe!")
    with pytest.raises(tlv.TlvNestingBug):
        tlv.target(bytes.fromhex("010602040badf00d"))
    payload = b"X\x37\x13\x00"
    with pytest.raises(checksum.ChecksumBug):
        checksum.target(sum(payload).to_bytes(2, "big") + payload)


# -- proxies ---------------------------------------------------------------------------------


def symbolic_root(data: bytes):
    root, variables = make_input(data, symbolic=True)
    return root, variables, Recorder(symbolic=True, max_branches=100)


def test_reflected_operators_stay_symbolic_and_evaluate_like_python() -> None:
    root, variables, rec = symbolic_root(bytes([0x5A, 0x03]))
    a, b = root[0], root[1]
    cases = {
        "3*a": (3 * a, 3 * 0x5A), "0xFF&a": (0xFF & a, 0xFF & 0x5A), "1+a": (1 + a, 1 + 0x5A),
        "7-a": (7 - a, 7 - 0x5A), "1|a": (1 | a, 1 | 0x5A), "0x0F^a": (0x0F ^ a, 0x0F ^ 0x5A),
        "1000//b": (1000 // b, 1000 // 3), "1000%b": (1000 % b, 1000 % 3),
        "a<<3": (a << 3, 0x5A << 3), "-a>>1": (-a >> 1, -0x5A >> 1), "~a": (~a, ~0x5A),
        "a*b-a": (a * b - a, 0x5A * 3 - 0x5A), "-7//b": (-7 // b, -7 // 3),
        "-7%b": (-7 % b, -7 % 3), "abs(b-a)": (abs(b - a), abs(3 - 0x5A)),
    }
    for name, (proxy, expected) in cases.items():
        assert isinstance(proxy, SymInt), name
        assert proxy.value == expected, name
        model = {variables.byte_vars[0]: z3.BitVecVal(0x5A, 8), variables.byte_vars[1]: z3.BitVecVal(3, 8)}
        replayed = z3.simplify(z3.substitute(proxy.expr, *model.items()))
        assert replayed.as_signed_long() == expected, name


def test_comparisons_record_branches_with_site_direction_and_condition() -> None:
    root, _, rec = symbolic_root(b"\x05\x09")
    with recording(rec):
        assert (3 < root[0]) is not True  # a SymBool, not a plain bool
        if root[0] == 5:
            pass
        if root[1] > 200:
            pass
        flag = not (root[0] ^ root[1])
    assert rec.taken == [True, False, True]  # the last is the truth of a ^ b, before `not`
    assert len(set(rec.sites)) == 3
    assert all(isinstance(c, z3.BoolRef) for c in rec.conds)
    assert flag is False
    assert edges_from_sites(rec.locations)  # branches are coverage


def test_a_comparison_with_no_condition_is_no_branch() -> None:
    """A comparison decided without the input (a SymBool with no condition, as C code that compared
    a symbolic value makes: functools.lru_cache's key lookup in urllib.parse.urlsplit) is no branch:
    it was recorded with the condition None, and every engine task of a target that called
    urlsplit on its input ended in ERROR (`'NoneType' object has no attribute 'get_id'`)."""
    root, _, rec = symbolic_root(b"\x05\x09")
    with recording(rec):
        if SymBool(True, 0, None):
            pass
        if root[0] == 5:
            pass
    assert rec.taken == [True] and len(rec.conds) == 1 and all(isinstance(c, z3.BoolRef) for c in rec.conds)


def test_an_engine_task_on_a_target_that_calls_urlsplit_is_no_error(make_target) -> None:
    target = make_target("""
        from urllib.parse import urlsplit

        def target(data):
            text = data.decode("latin-1")
            urlsplit(text)
            if urlsplit(data.decode("latin-1")).scheme == "ftp":  # the cached call: its key compared in C
                raise ValueError("ftp")
    """)
    engine = ConcolicEngine()
    for data in (b"%\x00.", b"http://a/b", b"x:y"):
        outcome = run_task(engine, target, data, exec_timeout_s=2.0)
        assert outcome.status is ExitKind.OK, outcome.error


def test_a_library_that_loads_its_plugins_with_importlib_finds_them(make_target, tmp_path) -> None:
    """A registry filled by a metaclass, and plugins loaded by name with ``importlib.import_module``
    or found through their entry points (sqlglot's dialects, Markdown's extensions). Under the engine the load's modules are rewritten
    copies: ``import_module`` gave the plain plugin, which registered itself in the plain registry,
    and the rewritten lookup failed ("Unknown dialect 'postgres'" on every sqlglot run: the engine
    found nothing there; "TableExtension must be of type Extension" on Markdown). Now, while a target
    runs, ``import_module`` of a module of its load is the rewritten copy, whoever calls it."""
    package = tmp_path / "sf_lazyreg"
    (package / "plugins").mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent("""
        import importlib

        class _Registering(type):
            classes = {}

            def __new__(mcs, name, bases, attrs):
                klass = super().__new__(mcs, name, bases, attrs)
                mcs.classes[name.lower()] = klass
                return klass

        class Plugin(metaclass=_Registering):
            def handle(self, text):
                return 0

        def get(name):
            if name not in _Registering.classes:
                importlib.import_module(f"sf_lazyreg.plugins.{name}")
            return _Registering.classes[name]

        def by_entry_point(name):  # as Markdown finds its extensions
            import importlib.metadata
            (point,) = [p for p in importlib.metadata.entry_points(group="sf_lazyreg.plugins") if p.name == name]
            klass = point.load()
            if not issubclass(klass, Plugin):
                raise TypeError(f"{klass} must be of type Plugin")
            return klass
    """))
    info = tmp_path / "sf_lazyreg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sf_lazyreg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[sf_lazyreg.plugins]\nlower = sf_lazyreg.plugins.lower:Lower\n")
    (package / "plugins" / "lower.py").write_text(textwrap.dedent("""
        from sf_lazyreg import Plugin

        class Lower(Plugin):
            def handle(self, text):
                return 2
    """))
    (package / "plugins" / "__init__.py").write_text("")
    (package / "plugins" / "upper.py").write_text(textwrap.dedent("""
        from sf_lazyreg import Plugin

        class Upper(Plugin):
            def handle(self, text):
                if text[:2] == "OK":
                    raise ValueError("planted")
                return 1
    """))
    target = make_target("""
        import sf_lazyreg

        def target(data):
            sf_lazyreg.by_entry_point("lower")().handle(data.decode("latin-1"))
            sf_lazyreg.get("upper")().handle(data.decode("latin-1"))
    """)
    outcome = run_task(ConcolicEngine(), target, b"ab", exec_timeout_s=2.0)
    assert outcome.status is ExitKind.OK, outcome.error
    assert outcome.stats.get("false_findings", 0) == 0, outcome.stats
    assert any(c.kind is ExitKind.CRASH and c.data[:2] == b"OK" for c in outcome.candidates), outcome.stats


def test_expandtabs_keeps_a_text_without_tabs_symbolic() -> None:
    """pyparsing expands the tabs of every text before it parses it: that concretised the whole
    input, and the engine followed nothing of a grammar."""
    root, _, rec = symbolic_root(b"ab c")
    with recording(rec):
        text = root.decode("latin-1").expandtabs()
        assert text == "ab c"
        before = len(rec.conds)
        if text[0] == "a":
            pass
    assert len(rec.conds) == before + 1 and rec.concretisations["str.expandtabs"] == 0
    tabbed, _, rec = symbolic_root(b"a\tb")
    with recording(rec):
        assert tabbed.decode("latin-1").expandtabs(4) == "a   b"


def test_bytes_proxy_slicing_equality_startswith_iteration_and_len() -> None:
    root, _, rec = symbolic_root(b"SYMF\x01\x02")
    assert len(root) == 6 and isinstance(root, bytes) and root == b"SYMF\x01\x02"
    header = root[:4]
    assert isinstance(header, type(root)) and len(header) == 4
    with recording(rec):
        assert header == b"SYMF"
        assert root.startswith(b"SYM")
        assert not root.endswith(b"\x03")
        assert root[4:] != root[:2]
        assert [int(x) for x in root[4:]] == [1, 2]
        assert 0x46 in root
    assert len(rec.sites) == 6  # the end of the iteration is a branch too (len > 6)
    assert isinstance(sym_len(root), SymInt) and sym_len(root).value == 6
    assert sym_len(root[2:]).value == 4 and isinstance(sym_len(root[2:]), SymInt)
    assert sym_len(b"abc") == 3


def test_int_from_bytes_and_sum_stay_symbolic() -> None:
    root, variables, rec = symbolic_root(b"\x34\x12\xff\x80")
    little = sym_from_bytes(root[0:2], "little")
    big_signed = sym_from_bytes(root[2:4], "big", signed=True)
    assert isinstance(little, SymInt) and little.value == 0x1234
    assert isinstance(big_signed, SymInt) and big_signed.value == int.from_bytes(b"\xff\x80", "big", signed=True)
    total = sum(root[1:]) & 0xFFFF
    assert isinstance(total, SymInt) and total.value == (0x12 + 0xFF + 0x80)
    solver = z3.Solver()
    solver.add(little.expr == 0xBEEF)
    assert solver.check() == z3.sat
    assert solver.model()[variables.byte_vars[0]].as_long() == 0xEF
    assert sym_from_bytes(b"\x01\x02", "little") == 0x0201  # plain bytes: the builtin


def test_instrumented_module_rewrites_from_bytes_len_and_int_unless_shadowed() -> None:
    code = instrument_source("x = int.from_bytes(b'\\x01', 'big') + int('3') + t[1]\n"
                             "y = 1 in t\nz = a == b\nif a == b:\n    pass\n", "<t>")
    names = set(code.co_names)
    assert {"__symfence_from_bytes__", "__symfence_int__", "__symfence_getitem__",
            "__symfence_in__", "__symfence_truth__"} <= names
    shadowed = instrument_source("def int(x):\n    return 0\ny = int('ab')\n", "<t>")
    assert "__symfence_int__" not in shadowed.co_names


def test_target_int_from_bytes_is_solved(make_target) -> None:
    target = make_target("""
        class Found(Exception):
            pass

        def target(data):
            if len(data) >= 4 and int.from_bytes(data[:4], "little") == 0x12345678:
                raise Found("from_bytes solved")
    """)
    outcome = run_task(ConcolicEngine(), target, bytes(4))
    crashes = [c for c in outcome.candidates if c.kind is ExitKind.CRASH]
    assert crashes and crashes[0].data == bytes.fromhex("78563412")
    assert "Found: from_bytes solved" in crashes[0].detail


def test_target_reflected_arithmetic_is_solved(make_target) -> None:
    target = make_target("""
        def target(data):
            if 3 * data[0] + (0xFF & data[1]) == 100 and 7 - data[2] == -5:
                raise RuntimeError("reflected")
    """)
    outcome = run_task(ConcolicEngine(), target, bytes(3))
    children = {c.data: c for c in outcome.candidates}
    found = [c for c in children.values() if c.kind is ExitKind.CRASH]
    assert not found  # the two conditions are separate branches: one generation each
    first = next(c for c in children.values() if 3 * c.data[0] + c.data[1] == 100)
    second = run_task(ConcolicEngine(), target, first.data, first.bound)
    assert any(c.kind is ExitKind.CRASH and c.data[2] == 12 for c in second.candidates)


def test_untracked_operations_concretise_without_crashing(make_target) -> None:
    target = make_target("""
        import hashlib, struct, zlib

        def target(data):
            (word,) = struct.unpack(">H", data[:2])
            text = data.decode("latin-1").upper()
            digest = hashlib.sha256(data).digest()
            crc = zlib.crc32(data)
            table = [10, 20, 30, 40]
            picked = table[data[0] % 4]
            label = f"{data[1]:02x}-{data[1]}" + str(data[0]) + hex(data[0]) + chr(data[1])
            counts = {data[0]: 1}
            as_float = data[0] / 2 + float(data[1])
            parts = data.split(b",")
            packed = bytes([data[0], data[1]]) + data[1].to_bytes(1, "big")
            if picked == 10 and word > 3 and crc and digest and text and label and counts:
                if as_float >= 0 and parts and packed and data[1] == 0x2C:
                    raise KeyError("reached")
    """)
    outcome = run_task(ConcolicEngine(), target, b"\x04\x00\x00")
    assert outcome.status is ExitKind.OK, outcome.error
    assert outcome.stats["concretisations"] > 0
    assert any(c.kind is ExitKind.CRASH and "KeyError" in c.detail for c in outcome.candidates)


def test_symbolic_division_tries_a_zero_divisor(make_target) -> None:
    target = make_target("""
        def target(data):
            if 100 // data[0] > 200:
                pass
    """)
    outcome = run_task(ConcolicEngine(), target, b"\x01")
    assert any(c.kind is ExitKind.CRASH and "ZeroDivisionError" in c.detail and c.data == b"\x00"
               for c in outcome.candidates)


# -- search mechanics ------------------------------------------------------------------------


def test_bound_children_bounds_and_replayed_traces() -> None:
    engine = ConcolicEngine()
    data = b"SYMF\x00\x00\x00\x00"
    full = run_task(engine, "examples.magic_header:target", data, 0)
    assert full.status is ExitKind.OK and full.trace and full.execs == 2 + len(full.candidates)
    assert sorted(c.bound for c in full.candidates) == [1, 2, 3]
    for child in full.candidates:
        assert child.trace and child.trace != full.trace
    bounded = run_task(ConcolicEngine(), "examples.magic_header:target", data, 2)
    # below the bound a branch on the length alone is negated only to grow the input: the
    # shorter input ``len(data) < 8`` asks for is the search at bound 0's child, not this one's
    assert [c.bound for c in bounded.candidates] == [3]
    assert bounded.candidates[0].data[4] == 3  # the version branch was flipped
    assert bounded.stats["sat"] == 1 and bounded.stats["unsat"] >= 1 and bounded.solver_s > 0


def test_memo_skips_queries_solved_for_other_work_but_not_retries() -> None:
    engine = ConcolicEngine()
    first = run_task(engine, "examples.magic_header:target", bytes(8), work_id="a")
    other = run_task(engine, "examples.magic_header:target", bytes(8) + b"\x01", work_id="b")
    retry = run_task(engine, "examples.magic_header:target", bytes(8), work_id="a")
    assert first.candidates and not other.candidates
    assert other.stats["memo_skips"] == len(first.candidates)
    assert [c.data for c in retry.candidates] == [c.data for c in first.candidates]


def test_branch_and_candidate_caps_are_counted(make_target) -> None:
    target = make_target("""
        def target(data):
            for b in data:
                if b == 0x41:
                    pass
    """)
    capped = run_task(ConcolicEngine(), target, bytes(20), max_branches=5)
    assert capped.stats["branches"] == 5 and capped.stats["branch_cap_hits"] == 1
    assert len(capped.candidates) == 5
    few = run_task(ConcolicEngine(), target, bytes(20), max_candidates=3)
    assert len(few.candidates) == 3 and few.stats["candidate_cap_hits"] == 1


def test_crash_and_hang_of_the_input_itself(make_target) -> None:
    target = make_target("""
        def target(data):
            if data[0] == 1:
                raise ValueError("input crash")
            if data[0] == 2:
                while True:
                    pass
    """)
    engine = ConcolicEngine()
    crashed = run_task(engine, target, b"\x01")
    assert crashed.status is ExitKind.CRASH and "ValueError: input crash" in crashed.error
    assert "worker/concolic" not in crashed.error  # engine frames are stripped
    start = time.perf_counter()
    hung = run_task(engine, target, b"\x02", exec_timeout_s=0.2)
    assert hung.status is ExitKind.HANG and time.perf_counter() - start < 2
    ok = run_task(engine, target, b"\x00", exec_timeout_s=0.2)
    kinds = {c.data: c.kind for c in ok.candidates}
    assert kinds[b"\x01"] is ExitKind.CRASH and kinds[b"\x02"] is ExitKind.HANG


def test_bad_target_or_options_are_error_outcomes() -> None:
    engine = ConcolicEngine()
    assert run_task(engine, "no_such_module_xyz:target", b"").status is ExitKind.ERROR
    assert run_task(engine, "examples.tlv:missing", b"").status is ExitKind.ERROR
    assert run_task(engine, "examples.tlv", b"").status is ExitKind.ERROR
    bad = run_task(engine, "examples.tlv:target", b"", max_candidates=-1)
    assert bad.status is ExitKind.ERROR and "max_candidates" in bad.error


def test_trace_and_symbolic_runs_record_the_same_branches() -> None:
    target = load_target("examples.tlv:target")
    data = bytes.fromhex("0106020200000000")
    concrete = execute(target, data, symbolic=False, timeout_s=1, max_branches=100)
    symbolic = execute(target, data, symbolic=True, timeout_s=1, max_branches=100)
    assert concrete.recorder.sites == symbolic.recorder.sites
    assert concrete.recorder.taken == symbolic.recorder.taken
    assert concrete.trace == symbolic.trace
    assert len(symbolic.recorder.conds) == len(symbolic.recorder.sites)
    assert isinstance(symbolic.recorder.conds[0], z3.BoolRef)
    assert sys.modules.get("examples.tlv") is tlv  # the instrumented copy is private
    assert isinstance(SymBool(True, 0, None), SymInt)


def test_a_paused_time_limit_does_not_count_the_block_and_keeps_the_rest() -> None:
    # a library module rewritten on its first import (inside a run) is the engine's time
    from symfence.worker.concolic.execution import paused, time_limit
    from symfence.worker.engine_api import ExecTimeout

    with time_limit(0.3):
        time.sleep(0.1)
        with paused():
            time.sleep(0.4)  # beyond the limit, paused
        time.sleep(0.1)  # 0.2 s of the 0.3 s used: no time-out
    started = time.monotonic()
    with pytest.raises(ExecTimeout):
        with time_limit(0.3):
            with paused():
                time.sleep(0.2)
            time.sleep(1.0)  # the rest of the limit still holds
    assert time.monotonic() - started < 0.9


def test_time_limit_puts_back_the_previous_alarm_handler_and_timer(make_target) -> None:
    import signal

    target = load_target(make_target("""
        def target(data):
            while data[0] == 1:
                pass
    """))
    previous_handler = signal.getsignal(signal.SIGALRM)
    previous_delay, _ = signal.getitimer(signal.ITIMER_REAL)  # pytest-timeout's, if any
    hung = execute(target, b"\x01", symbolic=False, timeout_s=0.1, max_branches=10)
    assert hung.kind is ExitKind.HANG
    assert signal.getsignal(signal.SIGALRM) is previous_handler
    delay, _ = signal.getitimer(signal.ITIMER_REAL)
    assert (delay > 0) == (previous_delay > 0) and delay <= previous_delay


def test_a_grown_input_that_no_longer_meets_the_loop_test_ends_the_growth() -> None:
    """Loop extension's ``grow_on``: the grown input may go another way before the length test it
    was grown past (dpkt's MPLS label loop; every task on that input ended in ERROR, ``max() arg
    is an empty sequence``). Stand-ins for the search's runs, the real ``LoopExtension``."""
    from collections import Counter
    from types import SimpleNamespace

    from symfence.worker.concolic.loops import LoopExtension

    def run(sites: list[int], taken: list[bool]) -> SimpleNamespace:
        return SimpleNamespace(recorder=SimpleNamespace(sites=sites, taken=taken))

    replayed = []
    search = SimpleNamespace(options=SimpleNamespace(loop_extensions=8, symbolic_timeout_s=5.0),
                             stats=Counter(), _replay=lambda *args: replayed.append(args))
    loops = LoopExtension(search)  # type: ignore[arg-type]
    loops._run = lambda data, bound: run([1, 7], [True, False])  # type: ignore[method-assign]
    for sites, expected in (([1, 2, 3], "loop_growths_elsewhere"), ([1, 7, 7], "loop_growths_found")):
        loops._grow_until = lambda *args, sites=sites: (run(sites, [True] * len(sites)), b"grown")  # type: ignore
        loops.grow_on(run([1, 7], [True, False]), b"child", 0, 7, False)
        assert search.stats[expected] == 1, search.stats
    assert replayed == [(b"grown", 2, 7, True, False)]  # the last meeting of the test, flipped
