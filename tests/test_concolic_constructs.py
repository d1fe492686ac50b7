"""The engine follows the input through each construct of examples/constructs, and reports no false finding.

Each construct target is found from one zero byte by the engine alone (no mutation), with a
coverage-guided generational search like the coordinator's. Proxies pass the ``int``/``bool``
checks real code does, and a crash that only the proxies cause is replayed on the plain
target, counted as ``false_findings`` and dropped.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import pkgutil
import textwrap
from collections import Counter, deque
from pathlib import Path
from typing import Callable

import pytest

import examples.constructs
from symfence.protocol.coverage import CoverageMap
from symfence.worker.concolic.engine import ConcolicEngine
from symfence.worker.concolic.execution import execute
from symfence.worker.concolic.instrument import instrumented_modules, load_target, parse_module_list
from symfence.worker.executors.base import CandidateOut, ExitKind, Outcome, Task

CONSTRUCTS = sorted(m.name for m in pkgutil.iter_modules(examples.constructs.__path__)
                    if not m.name.startswith("_"))
_counter = itertools.count()


@pytest.fixture
def make_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], str]:
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:
        name = f"sf_construct_target_{next(_counter)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        return f"{name}:target"

    return write


def search(target: str, options: dict, max_tasks: int, seed: bytes = b"\x00",
           ) -> tuple[list[CandidateOut], Counter[str], int]:
    """(findings, summed counters, tasks) of a generational search from ``seed`` (one zero byte)."""
    engine = ConcolicEngine()
    coverage = CoverageMap()
    queue = deque([(seed, 0)])
    findings: list[CandidateOut] = []
    totals: Counter[str] = Counter()
    tasks = 0
    while queue and tasks < max_tasks:
        data, bound = queue.popleft()
        tasks += 1
        work_id = hashlib.sha256(data + bound.to_bytes(4, "big")).hexdigest()
        outcome: Outcome = engine.run_task(Task("t", work_id, data, target, bound, options))
        assert outcome.status is ExitKind.OK, outcome.error
        totals.update(outcome.stats)
        for child in outcome.candidates:
            if child.kind is not ExitKind.OK:
                findings.append(child)
            elif coverage.merge(child.trace):
                queue.append((child.data, child.bound))
        if any("Found" in f.detail for f in findings):
            break
    return findings, totals, tasks


@pytest.mark.parametrize("construct", CONSTRUCTS)
def test_each_construct_is_found_from_a_zero_byte(construct: str) -> None:
    module = importlib.import_module(f"examples.constructs.{construct}")
    findings, totals, tasks = search(f"examples.constructs.{construct}:target",
                                     dict(getattr(module, "OPTIONS", {})), max_tasks=200)
    found = [f for f in findings if "Found" in f.detail]
    assert found, f"{construct}: not found in {tasks} tasks; counters {dict(totals)}"
    with pytest.raises(examples.constructs.Found):  # the plain target agrees
        module.target(found[0].data)
    assert totals["false_findings"] == 0


def test_constructs_are_not_found_by_the_plain_zero_seed() -> None:
    for construct in CONSTRUCTS:
        importlib.import_module(f"examples.constructs.{construct}").target(b"\x00")


def test_int_and_bool_checks_and_json_see_plain_values(make_target) -> None:
    target = make_target("""
        import json, struct

        def target(data):
            if not data:
                return
            b = data[0]
            if not isinstance(b, int) or type(b) is not int:
                raise TypeError("not an int")
            flag = b == 3  # a comparison used as a value is a real bool here
            if not isinstance(flag, bool) or type(flag) is not bool:
                raise TypeError("not a bool")
            text = json.dumps({"b": b, "flag": flag, "head": list(data[:3]), "n": len(data)})
            if json.loads(text)["flag"] is not flag:
                raise ValueError("json changed a bool")
            struct.pack(">B", b)
            if isinstance(b, bool) or f"{b:02x}" != format(int(b), "02x"):
                raise TypeError("formatting")
            if b == 7 and data[1:2] == b"\\x09":
                json.dumps([b, b + 1, -b, b * 1000, data[1:3].hex(), repr(b), str(b)])
    """)
    findings, totals, tasks = search(target, {}, max_tasks=40)
    assert findings == [], findings[0].detail
    assert totals["false_findings"] == 0
    assert totals["branches"] > 0 and totals["divergences"] == 0


def test_a_crash_only_the_proxies_cause_is_counted_and_dropped(make_target) -> None:
    # marshal refuses int subclasses: the instrumented run crashes, the plain one does not.
    target = make_target("""
        import marshal

        def target(data):
            if data and data[0] == 5:
                marshal.dumps(data[0])
    """)
    engine = ConcolicEngine()
    outcome = engine.run_task(Task("t", "w", b"\x00", target, 0, {}))
    assert outcome.status is ExitKind.OK
    assert [c for c in outcome.candidates if c.kind is not ExitKind.OK] == []
    assert outcome.stats["false_findings"] == 1
    direct = engine.run_task(Task("t", "w2", b"\x05", target, 0, {}))
    assert direct.status is ExitKind.OK and direct.stats["false_findings"] == 1


def test_a_hang_only_the_proxies_cause_is_their_slowness_not_a_false_finding(make_target) -> None:
    # 24,000 additions: 2 ms plain, past 0.1 s on proxies (pyelftools' and exifread's parsers)
    target = make_target("""
        def target(data):
            total = 0
            for _ in range(3000):
                for b in data:
                    total += b * 3 + 1
            return total
    """)
    outcome = ConcolicEngine().run_task(Task("t", "w-slow", b"abcdefgh", target, 0, {"exec_timeout_s": 0.1}))
    assert outcome.status is ExitKind.OK and not outcome.candidates
    assert outcome.stats["slow_runs_not_hangs"] == 1 and outcome.stats.get("false_findings", 0) == 0


def test_a_real_crash_is_confirmed_with_the_plain_traceback(make_target) -> None:
    target = make_target("""
        def target(data):
            if data and data[0] == 0x41:
                raise KeyError("real")
    """)
    outcome = ConcolicEngine().run_task(Task("t", "w", b"\x00", target, 0, {}))
    crashes = [c for c in outcome.candidates if c.kind is ExitKind.CRASH]
    assert len(crashes) == 1 and crashes[0].data == b"A" and "KeyError: 'real'" in crashes[0].detail
    assert outcome.stats.get("false_findings", 0) == 0


def test_unmodelled_calls_are_counted_by_kind_and_name_the_exit(make_target) -> None:
    target = make_target("""
        import zlib

        def target(data):
            try:
                zlib.decompress(data)
            except zlib.error:
                pass
    """)
    outcome = ConcolicEngine().run_task(Task("t", "w", b"\x00", target, 0, {}))
    assert outcome.stats["branches"] == 0
    assert outcome.stats["concretised_c_zlib.decompress"] == 1
    assert outcome.stats["left_via.c_zlib.decompress"] == 1


def test_instrumented_set_is_the_package_plus_listed_modules_never_symfence() -> None:
    names = instrumented_modules("examples.constructs.listed_module:target", ["email.quoprimime"])
    assert "examples.constructs.listed_module" in names and "email.quoprimime" in names
    assert not any(n.startswith(("symfence", "z3")) for n in names)
    assert parse_module_list(" tomllib._parser, plistlib ") == ("tomllib._parser", "plistlib")
    for bad in ("symfence.worker", "z3", "not a module"):
        with pytest.raises(ValueError):
            parse_module_list(bad)


def test_loop_extension_is_what_finds_the_varint_and_costs_nothing_on_a_scan(make_target) -> None:
    target = "examples.constructs.varint_loop:target"
    found, totals, _ = search(target, {}, max_tasks=60)
    assert any("Found" in f.detail for f in found)
    assert totals["loop_pursuits_found"] >= 2  # the first varint, then the second one
    off, off_totals, tasks = search(target, {"loop_extensions": 0}, max_tasks=60)
    assert not any("Found" in f.detail for f in off) and off_totals["loop_extension_runs"] == 0
    # a loop that reads the input to its end and goes on never ends on its length test
    scan = make_target("""
        def target(data):
            i = total = 0
            while i < len(data):
                total += data[i]
                i += 1
            if total == 1000 and data[0] == 7:
                raise KeyError("sum")
    """)
    _, scan_totals, _ = search(scan, {}, max_tasks=20)
    assert scan_totals["loop_growths"] == 0 and scan_totals["loop_extension_runs"] == 0


def test_str_and_bytes_subclasses_of_the_target_behave_as_written(make_target) -> None:
    """``class X(str)`` of rewritten code derives from the engine's symbolic str (construct
    ``str_subclass``), and must still be what the program wrote: its type, value, hash, copy and
    pickle; an ``Enum`` with a str mixin or a class with a metaclass of its own keeps its bases."""
    target = make_target("""
        import copy, enum, pickle

        class Name(str):
            pass

        class Raw(bytes):
            def __new__(cls, b):
                return bytes.__new__(cls, b)  # by name: no symbolic items, still bytes

        class Color(str, enum.Enum):
            RED = "r"

        class Meta(type):
            pass

        class Tagged(str, metaclass=Meta):
            pass

        def target(data):
            text = data.decode("latin-1")
            n = Name(text)
            n.note = 7
            assert type(n) is Name and isinstance(n, str) and n == text and str(n) == text
            assert hash(Name("ab")) == hash("ab") and {Name("ab"): 1}["ab"] == 1
            for c in (copy.copy(n), copy.deepcopy(n), pickle.loads(pickle.dumps(n))):
                assert type(c) is Name and c == text and c.note == 7
            reduced = n.__reduce_ex__(2)  # what pickle stores: the class, its plain value, its state
            assert reduced[1] == (Name, text) and type(reduced[1][1]) is str and reduced[2] == {"note": 7}
            r = Raw(data)
            assert type(r) is Raw and r == data and r[:1] == data[:1] and bytes(r) == data
            assert Color("r") is Color.RED and Color.RED == "r"
            assert type(Tagged(text)) is Tagged and type(Tagged) is Meta
            assert Name(data, "latin-1") == text  # str(bytes, encoding)
            if n[:2] == "OK":
                raise RuntimeError("reached")
    """)
    for data in (b"\x00", b"OKx"):
        run = execute(load_target(target), data, symbolic=True, timeout_s=5, max_branches=100)
        assert run.kind is (ExitKind.CRASH if data == b"OKx" else ExitKind.OK), run.detail


def test_bytes_added_to_a_bytearray_leave_it_a_bytearray(make_target) -> None:
    """``buf += data`` on a ``bytearray`` buffer (h11's receive buffer) keeps the buffer a mutable
    bytearray, as without the engine (counted as where the input left: ``bytearray.concat``);
    it became the symbolic bytes, and the buffer's ``del buf[:n]`` a false finding on every run."""
    target = make_target("""
        def target(data):
            buf = bytearray()
            alias = buf
            buf += data
            buf = buf + data[:1]
            assert type(buf) is bytearray and alias == data
            del buf[:1]
    """)
    engine = ConcolicEngine()
    outcome = engine.run_task(Task("t", "w-bytearray", b"ab", target, 0, {}))
    assert outcome.status is ExitKind.OK, outcome.error
    assert outcome.stats.get("false_findings", 0) == 0 and not outcome.candidates
    assert outcome.stats["concretised_bytearray.concat"] >= 1


def test_the_class_of_a_proxy_is_its_plain_type(make_target) -> None:
    """``x.__class__`` of a symbolic value is its plain type, as ``type(x)`` is (olefile's
    ``c if c.__class__ is int else c[0]`` indexed a SymInt: a false finding on every run), and
    the search still sees the bytes through it."""
    target = make_target("""
        def i8(c):
            return c if c.__class__ is int else c[0]

        def target(data):
            text = data.decode("latin-1")
            assert data.__class__ is bytes and text.__class__ is str and len(data).__class__ is int
            assert memoryview(data).__class__ is memoryview
            if len(data) > 1 and i8(data[1]) == 0x5A and (data[0] == 0x41).__class__ is bool:
                raise RuntimeError("through __class__")
    """)
    findings, totals, _ = search(target, {}, max_tasks=20, seed=b"\x00\x00")
    assert totals["false_findings"] == 0
    assert any("through __class__" in f.detail for f in findings), dict(totals)


def test_a_c_function_kept_in_a_class_is_not_made_a_method(make_target) -> None:
    """What a rewritten module gets counted (a C module's function, a compiled pattern's ``sub``)
    binds as a class attribute exactly when the original does: cssutils calls
    ``self.unicodesub(repl, text)`` on ``unicodesub = re.compile(...).sub``, and the counting
    wrapper, a plain function, had become a method (the text went in as ``count``)."""
    target = make_target("""
        import re, zlib

        class Tokenizer:
            unicodesub = re.compile(r"\\\\[0-9a-f]+").sub
            checksum = zlib.crc32

            def clean(self, text, data):
                return self.unicodesub(lambda m: "?", text), self.checksum(data)

        def target(data):
            text = data.decode("latin-1")
            cleaned, crc = Tokenizer().clean(text, data)
            assert cleaned == re.sub(r"\\\\[0-9a-f]+", "?", text) and crc == zlib.crc32(bytes(data))
    """)
    outcome = ConcolicEngine().run_task(Task("t", "w-unbound", b"a\\\\1f b", target, 0, {}))
    assert outcome.status is ExitKind.OK, outcome.error
    assert outcome.stats.get("false_findings", 0) == 0 and not outcome.candidates
    assert outcome.stats["concretised_c_re.Pattern.sub"] >= 1  # still counted


def test_bytes_of_symbolic_bytes_stays_symbolic(make_target) -> None:
    """``bytes(x)`` of the input, a view of it or a slice (asn1 wraps every read in it) keeps the
    items, as ``bytes(b)`` of plain bytes is ``b``; ``bytes(text, "ascii")`` encodes symbolically;
    ``bytearray(x)`` is still a plain copy, and now says so (``concretised_bytearray.copy``)."""
    target = make_target("""
        import io

        def target(data):
            head = bytes(io.BytesIO(data).read(2))
            tail = bytes(memoryview(data)[2:4])
            word = bytes(data[4:6].decode("latin-1"), "latin-1")
            mutable = bytearray(data[6:7])
            if head == b"AS" and tail == b"N1" and word == b"OK" and bytes(head) is head:
                raise RuntimeError("through bytes()")
            return mutable
    """)
    findings, totals, _ = search(target, {}, max_tasks=40, seed=b"\x00" * 8)
    assert totals["false_findings"] == 0
    assert any("through bytes()" in f.detail for f in findings), dict(totals)
    assert totals["concretised_bytearray.copy"] >= 1, dict(totals)
    assert not totals.get("concretised_bytes.convert"), dict(totals)


def test_builtins_imported_by_name_are_still_the_modelled_builtins(make_target) -> None:
    """``from builtins import bytes, int`` (Python 2 and 3 libraries: asn1) binds the builtins
    themselves: their calls are rewritten as anywhere else (taken for the module's own names,
    every ``bytes(...)`` of the input made it plain). A builtin imported under another name, or
    a name the module defines, is still left alone."""
    target = make_target("""
        from builtins import bytes, int
        from builtins import bytes as raw

        def target(data):
            if bytes(data[:2]) == b"PY" and int(data[2]) == 0x23 and raw(data[:1]) == b"P":
                raise RuntimeError("through from builtins import")
    """)
    findings, totals, _ = search(target, {}, max_tasks=60, seed=b"\x00" * 4)
    assert totals["false_findings"] == 0
    assert any("through from builtins import" in f.detail for f in findings), dict(totals)


def test_an_enum_made_from_a_symbolic_value_is_a_lookup_the_search_can_steer(make_target) -> None:
    """``Kind(data[0])`` of an ``IntEnum`` (a header's type byte, construct's ``EnumInteger``)
    went through enum's dict in C: ``concretised_hash``, and the member it picked was fixed. Now
    the membership and the member are branches: the search reaches the member behind them."""
    target = make_target("""
        import enum

        class Kind(enum.IntEnum):
            A = 1
            B = 7
            C = 200

        def target(data):
            try:
                kind = Kind(data[0])
            except ValueError:
                return
            if kind is Kind.C and data[1] == 0x42:
                raise RuntimeError("through the enum")
    """)
    findings, totals, _ = search(target, {}, max_tasks=40, seed=b"\x00\x00")
    assert totals["false_findings"] == 0
    assert any("through the enum" in f.detail for f in findings), dict(totals)
    assert not totals.get("concretised_hash"), dict(totals)


def test_an_int_subclass_made_from_a_symbolic_int_stays_symbolic(make_target) -> None:
    """``class EnumInteger(int)`` (construct), ``class p_uint32(int)``: ``int``'s constructor
    took the value in C, and everything after it was plain (construct: 277 such ``int``
    concretisations). Built from a SymInt, the instance keeps its term; ``int.__new__(cls, x)``
    called by name still makes a working instance (a constant), and it pickles as the class."""
    target = make_target("""
        import copy, pickle

        class Word(int):
            def describe(self):
                return "word %d" % self

        class Fixed(int):
            def __new__(cls, value):
                return int.__new__(cls, value)

        def target(data):
            word = Word(data[0])
            fixed = Fixed(data[1])
            assert isinstance(word, int) and type(word) is Word and word.describe()
            assert pickle.loads(pickle.dumps(word)) == word and type(copy.copy(word)) is Word
            if word + 1 == 0x43 and fixed >= 0 and word.bit_length() == 7:
                raise RuntimeError("through an int subclass")
    """)
    findings, totals, _ = search(target, {}, max_tasks=20, seed=b"\x00\x00")
    assert totals["false_findings"] == 0
    assert any("through an int subclass" in f.detail for f in findings), dict(totals)


def test_str_of_symbolic_text_stays_symbolic(make_target) -> None:
    """``str(x)``, an alias's call (``unicode = str``: pyjsparser's ``self.source = unicode(code)``)
    and f-strings of symbolic text keep it symbolic, as ``str(s)`` of a plain str is ``s``;
    ``str(data, "latin-1")`` decodes symbolically. Each was a plain copy: no branch after it, no
    concretisation counted, and the warning blamed an unused input."""
    target = make_target("""
        unicode = str

        class Name(str):
            pass

        def target(data):
            text = data.decode("latin-1")
            a = str(text[0:1])
            b = unicode(text[1:2])
            c = f"{text[2:3]}{text[3:4]}"
            d = str(data[5:6], "latin-1") + str(Name(text[6:7]))
            if a == "s":
                if b == "t":
                    if c == "rf":
                        if d == "OK":
                            raise RuntimeError("through str()")
    """)
    findings, totals, _ = search(target, {}, max_tasks=40, seed=b"\x00" * 8)
    assert totals["false_findings"] == 0
    assert any("through str()" in f.detail for f in findings), dict(totals)


def test_comparing_cyclic_containers_is_no_false_finding(make_target) -> None:
    """``node.get("next") != top`` of a doubly linked list of dicts (commonmark's delimiter
    stack): Python answers at once (the same object), and the engine's progress score recursed
    through the cycle to a RecursionError, a false finding on every input with emphasis."""
    target = make_target("""
        def target(data):
            first = {"cc": data[0], "previous": None, "next": None}
            top = {"cc": 0x2A, "previous": first, "next": None}
            first["next"] = top
            if first.get("next") != top:
                raise RuntimeError("unreachable")
            if [first, top] == [first, top] and first["cc"] == 0x2A:
                raise RuntimeError("through a cycle")
    """)
    findings, totals, _ = search(target, {}, max_tasks=10, seed=b"\x00")
    assert totals["false_findings"] == 0, dict(totals)
    assert any("through a cycle" in f.detail for f in findings), dict(totals)

