"""The engine follows text through join, memo dicts, container ``==``, ``int`` as a converter, to a JSON key.

Each construct in a target of its own (a search from a small seed, the engine in process, real
z3), each of which the engine did not follow before: ``"".join`` of symbolic pieces gave plain
text; ``memo.setdefault(k, k)`` handed back an older equal key (another part of the input)
and hashed the key; a dict compared with ``==`` was C's hash lookup (a key not yet right is a
plain miss); ``parse_int or int`` called the real ``int``; a piece compared with a constant of
another length was a plain ``False`` (now the input with the piece replaced), and an empty
key, whose place is lost in ``"".join([])``, never met the constant (now it is inserted where
an empty piece was tested). Then json's own Python scanner (``json`` instrumented) end to end:
``json.loads(data) == {"k": 7}`` and ``{"cmd": ["run", 3]}``.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_concolic_constructs import search

_counter = itertools.count()
JSON = {"instrument": "json"}


@pytest.fixture
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], str]:
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(body: str) -> str:
        name = f"sf_json_target_{next(_counter)}"
        source = "import json\n\nclass Found(Exception):\n    pass\n\n" + textwrap.dedent(body)
        (tmp_path / f"{name}.py").write_text(source)
        return f"{name}:target"

    return write


def _found(spec: str, seed: bytes, max_tasks: int, options: dict | None = None) -> tuple[bytes, int, dict]:
    findings, totals, tasks = search(spec, dict(options or {}), max_tasks, seed=seed)
    found = [f for f in findings if "Found" in f.detail]
    assert found, f"not found in {tasks} tasks; counters {dict(totals)}"
    assert totals["false_findings"] == 0
    return found[0].data, tasks, dict(totals)


def test_join_of_symbolic_pieces_is_symbolic(target: Callable[[str], str]) -> None:
    spec = target("""
        def target(data):
            s = data.decode("latin-1")
            glue = "-".join
            if glue([s[:2], s[2:4]]) == "ok-go" and b"".join([data[4:5], b"!", data[5:6]]) == b"x!y":
                raise Found("join")
    """)
    data, tasks, _ = _found(spec, b"\0" * 6, 10)
    assert data == b"okgoxy" and tasks <= 3


def test_a_memo_hands_back_the_key_itself_unhashed(target: Callable[[str], str]) -> None:
    spec = target("""
        def target(data):
            s = data.decode("latin-1")
            memo = {}
            memo_get = memo.setdefault
            first = s[:2]
            first = memo_get(first, first)
            second = s[2:4]
            second = memo_get(second, second)  # equal to first in the seed: C would return first
            if second == "zz" and first == "ab":
                raise Found("memo")
    """)
    data, _, totals = _found(spec, b"\0" * 4, 10)
    assert data == b"abzz"
    assert "concretised_hash" not in totals  # the key was never hashed


def test_an_alias_table_lookup_branches_over_its_aliases(target: Callable[[str], str]) -> None:
    spec = target("""
        ALIASES = {"cl": "co", "co": "co", "xy": "xy"}

        def target(data):
            word = data.decode("latin-1")[:2]
            if ALIASES.get(word, word) == "co" and word != "co":
                raise Found("alias")
    """)
    data, _, _ = _found(spec, b"\0\0", 10)
    assert data == b"cl"


def test_a_dict_compared_with_a_literal_dict(target: Callable[[str], str]) -> None:
    spec = target("""
        def target(data):
            s = data.decode("latin-1")
            doc = {s[:1]: [s[1:2], data[2]], "v": data[3]}
            if doc != {"v": 1, "k": ["r", 7]}:
                return
            raise Found("dict")
    """)
    data, tasks, _ = _found(spec, b"\0" * 4, 10)
    assert data == b"kr\x07\x01" and tasks <= 3


def test_int_picked_as_a_converter_parses_symbolically(target: Callable[[str], str]) -> None:
    spec = target("""
        def target(data, parse_int=None):
            convert = parse_int or int
            assert isinstance(7, convert) and isinstance(7, (str, convert))
            if convert(data.decode("latin-1")) == 42:
                raise Found("int")
    """)
    data, _, _ = _found(spec, b"00", 10)
    assert data == b"42"


def test_a_piece_compared_with_a_longer_constant_is_replaced(target: Callable[[str], str]) -> None:
    spec = target("""
        def target(data):
            head, _, rest = data.decode("latin-1").partition(",")
            if head == "hello" and rest == "w":
                raise Found("splice")
    """)
    data, tasks, totals = _found(spec, b"a,b", 10)
    assert data == b"hello,w" and totals["splices"] >= 1 and tasks <= 3


def _json_request(expected: str) -> str:
    """A target raising ``Found`` when the input is the JSON document ``expected``."""
    return f"""
        def target(data):
            try:
                doc = json.loads(data)
            except (ValueError, RecursionError):
                return
            if doc == {expected}:
                raise Found(repr(doc))
    """


def test_json_key_and_int_value_from_an_empty_key(target: Callable[[str], str]) -> None:
    spec = target(_json_request('{"k": 7}'))
    data, tasks, totals = _found(spec, b'{"":0}', 10, JSON)
    assert data == b'{"k":7}' and totals["insertions"] >= 1 and tasks <= 3
    findings, _, _ = search(spec, {}, 10, seed=b'{"":0}')  # json not rewritten: its C scanner
    assert not findings


def test_json_nested_list_with_a_string_and_an_int(target: Callable[[str], str]) -> None:
    spec = target(_json_request('{"cmd": ["run", 3]}'))
    data, tasks, _ = _found(spec, b'{"cmd": ["stop", 0]}', 10, JSON)
    assert data == b'{"cmd": ["run", 3]}' and tasks <= 3
