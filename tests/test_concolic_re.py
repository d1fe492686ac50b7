"""The engine follows ``re`` on symbolic text (z3's regex theory), groups stay symbolic, the rest is counted.

Real z3, the engine in process (no MPI). ``retheory.translate`` is checked against the real
``re`` on many strings (a translation that accepted a different language would give wrong path
conditions); the engine then flips a ``fullmatch`` and checks on its groups from one zero byte,
and a pattern outside the translated subset is counted (``re.<reason>``), never a crash.
"""

from __future__ import annotations

import random
import re
import textwrap
from pathlib import Path

import pytest
import z3

from symfence.worker.concolic.engine import ConcolicEngine
from symfence.worker.concolic.execution import execute
from symfence.worker.concolic.instrument import load_target
from symfence.worker.concolic.retheory import MAX_CHAR, Unsupported, domain_for, translate
from symfence.worker.executors.base import ExitKind, Task
from tests.test_concolic_constructs import search

PATTERNS = [  # (pattern, flags, a text it fullmatches)
    (r"v(\d{3})-([a-z]{2,4})", 0, "v418-zq"), (r"[^a-c\s]+x?", 0, "dz"),
    (r"(?:ab|c)*d{2,}", 0, "abcddd"), (r"\w+@\w+\.(com|org)", 0, "x_1@y.org"),
    (r"[A-F0-9]{4}", re.IGNORECASE, "0aF9"), (r"k[a-z]s", re.IGNORECASE, "\u212aZ\u017f"),
    (r"a.b", 0, "azb"), (r"a.b", re.DOTALL, "a\nb"), (r"\S\D\W", 0, "\u0663a."),
    (r"\d+", re.ASCII, "019"), (r"(a|bc)+?z", 0, "abcaz"), (r"[\d\s]{0,3}\.", 0, "\u0663 .")
]
ALPHABET = "abcdkszABCDKSZ019 .-_@\n\t\u212a\u017f\u0663x"


def _accepts(body: z3.ReRef, text: str) -> bool:
    solver = z3.Solver()
    solver.add(z3.InRe(z3.StringVal(text), body))
    verdict = solver.check()
    assert verdict != z3.unknown
    return verdict == z3.sat


@pytest.mark.parametrize("pattern,flags,example", PATTERNS)
def test_translation_accepts_what_re_fullmatch_accepts(pattern: str, flags: int, example: str) -> None:
    """Random texts, and the example with one character replaced, inserted or deleted."""
    rng = random.Random(pattern)
    compiled = re.compile(pattern, flags)
    texts = ["", example]
    texts += ["".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 7))) for _ in range(60)]
    for _ in range(60):
        i = rng.randrange(len(example) + 1)
        texts.append(example[:i] + rng.choice(["", rng.choice(ALPHABET)]) + example[i + rng.randrange(2):])
    verdicts = set()
    for text in texts:
        expected = compiled.fullmatch(text) is not None
        verdicts.add(expected)
        body = translate(pattern, flags, domain_for(map(ord, text))).body  # as the engine
        assert _accepts(body, text) == expected, (pattern, text)
    assert verdicts == {True, False}


def test_classes_cut_to_the_texts_domain_still_agree_on_it() -> None:
    assert domain_for([0x41]) == ((0, 0x7F),) and domain_for([0x41, 0xE9]) == ((0, 0xFF),)
    assert domain_for([0x663]) == ((0, 0xFF), (0x663, 0x663))
    assert domain_for(range(0x100, 0x200)) == ((0, MAX_CHAR),)
    body = translate(r"[^a]\d", 0, ((0, 0x7F),)).body
    assert _accepts(body, "b7") and not _accepts(body, "a7") and not _accepts(body, "\u00e97")


@pytest.mark.parametrize("pattern,reason", [
    (r"(a)\1", "groupref"), (r"(?=a)a", "assert"), (r"(?!a)b", "assert_not"),
    (r"a\bc", "anchor_at_boundary"), (r"a^b", "anchor_at_beginning"), (r"(?m)^a$", "anchor_multiline"),
    (r"a++", "possessive_repeat"),
])
def test_patterns_outside_the_subset_name_their_reason(pattern: str, reason: str) -> None:
    with pytest.raises(Unsupported) as info:
        translate(pattern, 0)
    assert info.value.reason == reason


@pytest.fixture
def write_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        return f"{name}:target"

    return write


def test_fullmatch_and_its_groups_are_flipped_from_a_zero_byte() -> None:
    findings, totals, tasks = search("examples.constructs.regex_groups:target", {}, max_tasks=60)
    found = [f for f in findings if "Found" in f.detail]
    assert found, f"not found in {tasks} tasks: {dict(totals)}"
    assert re.fullmatch(rb"v418-zq[a-z]{0,2}", found[0].data)
    assert totals["false_findings"] == 0


def test_search_split_and_pattern_methods_record_one_branch_each(write_target) -> None:
    spec = write_target("sf_re_branches", """
        import re
        WORD = re.compile(r"[a-z]+")

        def target(data):
            text = data.decode("latin-1")
            re.search(r"\\d\\d", text)
            WORD.match(text, 1)
            parts = re.split(r",", text)
            if parts[0] == "ab":
                return 1
    """)
    run = execute(load_target(spec), b"ab,c", symbolic=True, timeout_s=5, max_branches=100)
    assert run.kind is ExitKind.OK, run.detail
    rec = run.recorder
    assert not rec.concretisations, rec.concretisations
    assert len(set(rec.sites)) >= 4  # search, match at pos 1, split, and the test on a piece
    trace = execute(load_target(spec), b"ab,c", symbolic=False, timeout_s=5, max_branches=100)
    assert trace.recorder.sites == rec.sites  # the same branches without terms


def test_unsupported_pattern_is_concretised_and_counted_not_a_crash(write_target) -> None:
    spec = write_target("sf_re_backref", """
        import re

        def target(data):
            m = re.fullmatch(r"(ab)\\1x", data.decode("latin-1"))
            if m and m.group(1) == "ab":
                raise ValueError("reached")
    """)
    outcome = ConcolicEngine().run_task(Task("t", "w1", b"abz", spec, 0, {}))
    assert outcome.status is ExitKind.OK, outcome.error
    assert outcome.stats["concretised_re.groupref"] >= 1
    run = execute(load_target(spec), b"ababx", symbolic=True, timeout_s=5, max_branches=100)
    assert run.kind is ExitKind.CRASH  # the real result, and the group is still a usable str
