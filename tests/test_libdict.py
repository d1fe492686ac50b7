"""The library's constants as dictionary tokens (worker/fuzz/libdict.py): what, in what order, the file."""

from __future__ import annotations

import types

from symfence.coordinator.fuzzdict import read_tokens
from symfence.worker.fuzz import libdict
from symfence.worker.fuzz.libdict import MAX_WORD, library_tokens, write_dictionary

SOURCE = '''
KEYWORDS = frozenset({"SELECT", "WHERE"})
OPERATORS = {"<=": 1, ">=": 2, "+": 3}
__all__ = ["parse_all_of_it"]
MAGIC = b"\\x89PNG"
PROSE = "this is a message for people, not a keyword"

def parse(text):
    """A docstring is prose: left out."""
    if text.startswith("--"):
        return "comment"
    def inner(word):
        return word in ("ASC", "DESC")
    if text == "__dunder__" or text == "x":
        return inner(text)
    return "two\\nlines"

class Lexer:
    TOKENS = ("BEGIN", "END")

    @staticmethod
    def kind(c):
        return "digit" if c.isdigit() else "other"

    @property
    def name(self):
        return "lexer-name"

    class Nested:
        MARK = ["<!--"]
'''


def _module(source: str = SOURCE, name: str = "libdict_sample") -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - the test's own source
    for value in module.__dict__.values():
        if type(value) is type:  # (not isinstance: a value's __class__ may raise)
            value.__module__ = name
            for inner in vars(value).values():
                if type(inner) is type:
                    inner.__module__ = name
    return module


def test_tables_come_first_then_the_code_constants():
    tokens = library_tokens([_module()])
    tables = {b"SELECT", b"WHERE", b"<=", b">=", b"ASC", b"DESC", b"BEGIN", b"END", b"<!--"}
    constants = {b"--", b"comment", b"\x89PNG", b"digit", b"other", b"lexer-name"}
    assert set(tokens[:len(tables)]) == tables
    assert constants <= set(tokens[len(tables):])


def test_prose_dunders_single_bytes_and_lines_are_left_out():
    tokens = set(library_tokens([_module()]))
    for absent in (b"+", b"x", b"__dunder__", b"two\nlines", b"parse_all_of_it",
                   b"this is a message for people, not a keyword", b"A docstring is prose: left out."):
        assert absent not in tokens


def test_long_constants_are_left_out_and_the_limit_holds():
    long = "k" * (MAX_WORD + 1)
    module = _module(f"T = {{'{long}', 'ok'}}\n" + "\n".join(f"C{i} = 'word{i:04d}'" for i in range(50)))
    tokens = library_tokens([module], limit=10)
    assert len(tokens) == 10 and tokens[0] == b"ok" and long.encode() not in tokens


def test_the_more_functions_use_a_constant_the_earlier_it_comes():
    module = _module("def a(s):\n    return s == 'rare'\n"
                     + "".join(f"def f{i}(s):\n    return s == 'common'\n" for i in range(3)))
    assert library_tokens([module])[:2] == [b"common", b"rare"]


def test_the_file_keeps_the_given_dictionary_and_reads_back(tmp_path):
    given = tmp_path / "given.dict"
    given.write_text('kw0="engine"')  # no final newline
    path = tmp_path / "library.dict"
    tokens = [b"SELECT", b'quote"and\\back', b"\x00\xff"]
    assert write_dictionary(str(path), tokens, first=str(given)) == 3
    assert read_tokens(path) == [b"engine", *tokens]


def test_the_fuzz_process_points_libfuzzer_at_one_merged_dictionary(tmp_path, monkeypatch):
    from symfence.worker.fuzz import live_child

    module = _module(name="libdict_target")
    monkeypatch.setitem(__import__("sys").modules, "libdict_target", module)
    given = tmp_path / "given.dict"
    given.write_text('kw0="engine"\n')
    path = tmp_path / "library.dict"
    args = live_child._with_library_dict(["prog", "corpus", f"-dict={given}", "-timeout=1"], "libdict_target",
                                         lambda name: False, str(path))
    assert args == ["prog", "corpus", "-timeout=1", f"-dict={path}"]
    assert read_tokens(path)[:2] == [b"engine", b"<="] and b"SELECT" in read_tokens(path)
    nothing = live_child._with_library_dict(["prog"], "no_such_module", lambda name: False, str(path))
    assert nothing == ["prog"]


def test_modules_of_takes_the_harness_and_the_wanted_modules_never_symfence(monkeypatch):
    import sys

    for name in ("pkg_under_test", "pkg_under_test.sub", "other_pkg", "harness_mod"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    names = {m.__name__ for m in libdict.modules_of("harness_mod", lambda n: n.split(".")[0] in
                                                    ("pkg_under_test", "symfence"))}
    assert {"pkg_under_test", "pkg_under_test.sub", "harness_mod"} <= names
    assert "other_pkg" not in names and not any(n.startswith("symfence") for n in names)


def test_a_value_that_cannot_be_looked_at_costs_only_itself(tmp_path):
    module = _module("class Proxy:\n    @property\n    def __class__(self):\n"
                     "        raise RuntimeError('no context')\n"
                     "LAZY = Proxy()\nWORDS = ('alpha', 'beta')\n")
    assert library_tokens([module]) == [b"beta", b"alpha"]


def test_an_unreadable_campaign_dictionary_leaves_the_arguments_as_they_were(tmp_path, monkeypatch):
    from symfence.worker.fuzz import live_child

    monkeypatch.setitem(__import__("sys").modules, "libdict_target", _module(name="libdict_target"))
    args = ["prog", f"-dict={tmp_path / 'missing.dict'}"]
    kept = live_child._with_library_dict(args, "libdict_target", lambda n: False, str(tmp_path / "l.dict"))
    assert kept == args


def test_the_literal_runs_of_compiled_patterns_are_table_words():
    module = _module("import re\n"
                     "KEYWORD = re.compile(r'\\b(select|where)\\b', re.I)\n"
                     "RULES = [(re.compile(r'<!--.*?-->'), 'comment'),\n"
                     "         (re.compile(rb'\\x89PNG\\r\\n'), 'png')]\n"
                     "class Lexer:\n    NUMBER = re.compile(r'0x[0-9a-f]+(?:ul)?')\n"
                     "def f(s):\n    return s == 'zzconst'\n")
    tokens = library_tokens([module])
    for word in (b"select", b"where", b"<!--", b"-->", b"\x89PNG\r\n", b"0x", b"ul", b"comment", b"png"):
        assert word in tokens
    assert tokens[-1] == b"zzconst"  # the code's constants after every table word
