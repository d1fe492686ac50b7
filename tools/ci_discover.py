"""Finds a repository's Atheris harnesses for `symfence ci`, and what each one's campaign starts from.

A harness is any Python file of the repository (tracked, or new and not ignored) that hands a
function of its own to ``atheris.Setup`` or defines ``TestOneInput`` at its top level
(``protocol/entrypoint.py``), whatever its name or folder (``fuzz_x.py`` at the root,
``fuzz/``, ``tests/fuzz/``, ``x_fuzzer.py``); folders a repository does not own (virtual
environments, ``site-packages``, hidden folders, build outputs) are never searched. For each
harness, as OSS-Fuzz lays them out and as the demo has them (``examples/parsers/seeds``):
- seeds: the CI corpus folder, then ``<stem>_seed_corpus/`` or ``<stem>_seed_corpus.zip``,
  ``seeds/`` and ``corpus/`` beside the harness;
- dictionary: ``<stem>.dict`` beside the harness, else the only ``*.dict`` there;
- import path: the harness's folder (as ``python fuzz_x.py`` has it), the repository's ``src/``
  (the src layout) and its root, so ``import mypkg`` works without installing the package;
- the code under test: the harness and the repository's modules it imports, transitively;
- dictionary tokens from the constants of the code under test, the harness's first (strings,
  bytes and small integers: what the parser compares the input with; AFL++'s autodictionary and
  libFuzzer's comparison hooks find such tokens at run time, but not past a
  dict lookup or C code), added to the dictionary above;
- the standard-library parsers the code under test imports (``json``, ``zipfile``, ...): the
  engine rewrites them too (``concolic.instrument``), so it follows the input into them, as the
  demo has the engine follow ``wave``.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from symfence.protocol.entrypoint import entry_point

# Folders a repository holds but does not own: never searched for harnesses or imports.
_NOT_OWNED = {"venv", "env", "site-packages", "dist-packages", "node_modules", "build", "dist", "out",
              "__pycache__", "fuzz_regressions"}
_MAX_SOURCE_BYTES = 2_000_000
# Standard-library modules that parse their input in Python code the engine can follow.
STDLIB_PARSERS = frozenset({
    "aifc", "chunk", "configparser", "email", "gzip", "html", "imghdr", "ipaddress", "json",
    "mailbox", "mimetypes", "netrc", "plistlib", "quopri", "shlex", "sndhdr", "sunau", "tarfile",
    "tomllib", "uu", "wave", "zipfile",
})


class DiscoveryError(Exception):
    """No usable harness, as one line."""


def _owned(rel: str) -> bool:
    parts = Path(rel).parts[:-1]
    return not any(p.startswith(".") or p in _NOT_OWNED or p.endswith(".egg-info") for p in parts)


def python_files(root: Path) -> list[Path]:
    """The repository's own ``.py`` files: tracked, or new and not ignored (a first harness not yet
    committed counts)."""
    proc = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                           "--exclude-standard", "--", "*.py"], capture_output=True)
    if proc.returncode:
        raise DiscoveryError(f"git ls-files: {proc.stderr.decode(errors='replace').strip()}")
    names = sorted({n for n in proc.stdout.decode(errors="surrogateescape").split("\0") if n})
    return [root / n for n in names if _owned(n) and (root / n).is_file()]


def _read(path: Path) -> bytes:
    try:
        if path.stat().st_size > _MAX_SOURCE_BYTES:
            return b""
        return path.read_bytes()
    except OSError:
        return b""


def entry_of(path: Path) -> str | None:
    """The harness's test function (``entrypoint.entry_point``), or None: not a harness. Only
    files that name Atheris's Setup or the convention are parsed."""
    data = _read(path)
    if b"TestOneInput" not in data and b"Setup" not in data:
        return None
    return entry_point(data)


def is_harness(path: Path) -> bool:
    return entry_of(path) is not None


def find_harnesses(root: Path) -> list[Path]:
    """Every file of the repository that is an Atheris harness (``entry_of``)."""
    return [p for p in python_files(root) if is_harness(p)]


def check_harness(path: Path) -> None:
    """Refuse, as one line, a file ``symfence ci`` cannot run as a harness."""
    if not path.is_file():
        raise DiscoveryError(f"{path}: no such harness file")
    if path.suffix != ".py":
        raise DiscoveryError(f"{path}: a harness is a .py file of Atheris's (TestOneInput(data), or"
                             " the function it hands to atheris.Setup)")
    if not path.stem.isidentifier():
        raise DiscoveryError(f"{path}: {path.stem!r} is not a module name (rename it, e.g."
                             f" {re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}.py)")
    if not is_harness(path):
        raise DiscoveryError(f"{path}: defines no TestOneInput(data) at its top level and hands no"
                             " function of its own to atheris.Setup")


def imported_names(source: bytes) -> set[str]:
    """Every absolute module name a module's source imports (anywhere in it), ``from a import b``
    giving ``a`` and ``a.b``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def stdlib_imports(source: bytes) -> set[str]:
    """Top-level standard-library packages a module's source imports."""
    return {n.partition(".")[0] for n in imported_names(source)} & set(sys.stdlib_module_names)


def _module_files(name: str, import_path: tuple[Path, ...]) -> list[Path]:
    """The repository file of module ``name`` (a package: its ``__init__.py``)."""
    parts = name.split(".")
    for folder in import_path:
        base = folder.joinpath(*parts)
        for f in (base.with_suffix(".py"), base / "__init__.py"):
            if f.is_file():
                return [f]
    return []


def _relative_files(path: Path, source: bytes) -> list[Path]:
    """The files ``from . import x`` / ``from .m import y`` name, relative to ``path``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    files: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
            stems = [node.module] if node.module else [alias.name for alias in node.names]
            for stem in stems:
                files += _module_files(stem, (base,))
            if node.module:
                for alias in node.names:
                    files += _module_files(f"{node.module}.{alias.name}", (base,))
    return files


def code_under_test(harness: Path, import_path: tuple[Path, ...], owned: set[Path]) -> list[Path]:
    """The harness and the repository modules it imports, transitively (files in ``owned`` only)."""
    seen: dict[Path, None] = {harness.resolve(): None}
    todo = [harness.resolve()]
    while todo:
        path = todo.pop()
        source = _read(path)
        found = _relative_files(path, source)
        for name in sorted(imported_names(source)):
            if name.partition(".")[0] not in sys.stdlib_module_names:
                found += _module_files(name, import_path)
        for f in found:
            f = f.resolve()
            if f in owned and f not in seen:
                seen[f] = None
                todo.append(f)
    return list(seen)


MAX_TOKENS = 256  # dictionary tokens taken from source constants (more dilutes libFuzzer's choice)
_MAX_TOKEN_BYTES = 32


def constant_tokens(source: bytes) -> list[bytes]:
    """String, bytes and integer constants of a module's code (docstrings left out), as tokens."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, scopes) and n.body and isinstance(n.body[0], ast.Expr)
                  and isinstance(n.body[0].value, ast.Constant)}
    tokens: list[bytes] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or id(node) in docstrings:
            continue
        value = node.value
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, str):
            token = value.encode("utf-8", "surrogatepass")
        elif isinstance(value, bytes):
            token = value
        elif isinstance(value, int) and -(1 << 31) <= value < (1 << 32) and not 0 <= value <= 1:
            token = str(value).encode()
        else:
            continue
        if 0 < len(token) <= _MAX_TOKEN_BYTES:
            tokens.append(token)
    return tokens


def dictionary_line(token: bytes) -> str:
    """One libFuzzer/AFL dictionary entry: the token quoted, anything not plain printable as \\xNN."""
    body = "".join(chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else f"\\x{b:02x}" for b in token)
    return f'"{body}"'


@dataclass(frozen=True)
class HarnessSetup:
    """What one harness's campaign starts from, found beside it and in the repository."""

    harness: Path
    seeds: tuple[Path, ...]  # folders (a seed-corpus zip is unpacked into ``unpacked``)
    seed_zips: tuple[Path, ...]
    dictionary: Path | None  # the user's, beside the harness
    tokens: tuple[bytes, ...]  # from the source constants
    import_path: tuple[Path, ...]  # first on sys.path, in order
    instrument: tuple[str, ...]  # stdlib parsers the engine rewrites

    def describe(self, root: Path) -> str:
        def rel(p: Path) -> str:
            try:
                return str(p.relative_to(root))
            except ValueError:
                return str(p)

        seeds = ", ".join(rel(p) for p in (*self.seeds, *self.seed_zips)) or "one zero byte"
        words = f"{len(self.tokens)} tokens from the source"
        dictionary = f"{rel(self.dictionary)} + {words}" if self.dictionary else words
        return (f"seeds {seeds}; dict {dictionary};"
                f" engine follows {', '.join(self.instrument) or 'the harness and the package it imports'}")

    def write_dictionary(self, path: Path) -> Path | None:
        """The user's dictionary and the source tokens in one file (None: neither)."""
        lines = self.dictionary.read_text(errors="replace").splitlines() if self.dictionary else []
        lines += [dictionary_line(t) for t in self.tokens]
        if not lines:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        return path

    def unpack_seeds(self, into: Path) -> list[Path]:
        """The seed folders, the zips unpacked under ``into``."""
        folders = list(self.seeds)
        for i, archive in enumerate(self.seed_zips):
            dest = into / f"seed-zip-{i}"
            dest.mkdir(parents=True, exist_ok=True)
            try:
                with zipfile.ZipFile(archive) as zf:
                    for n, info in enumerate(zf.infolist()):
                        if not info.is_dir() and info.file_size <= 1 << 20:
                            (dest / f"{n:06d}").write_bytes(zf.read(info))
            except (OSError, zipfile.BadZipFile) as exc:
                print(f"symfence ci: {archive}: not a readable zip ({exc}); skipped", file=sys.stderr)
                continue
            folders.append(dest)
        return folders


def setup(root: Path, harness: Path, corpus: Path, sources: list[Path] | None = None) -> HarnessSetup:
    """Seeds, dictionary, import path, stdlib parsers and tokens for ``harness`` (``corpus``: its CI
    corpus folder; ``sources``: the repository's own Python files, default ``python_files``)."""
    here, stem = harness.parent, harness.stem
    seeds = [corpus] if corpus.is_dir() else []
    seeds += [p for p in (here / f"{stem}_seed_corpus", here / "seeds", here / "corpus") if p.is_dir()]
    zips = [p for p in (here / f"{stem}_seed_corpus.zip",) if p.is_file()]
    dictionary = here / f"{stem}.dict"
    if not dictionary.is_file():
        dicts = sorted(here.glob("*.dict"))
        dictionary = dicts[0] if len(dicts) == 1 else None  # type: ignore[assignment]
    folders = (here, *(p for p in (root / "src",) if p.is_dir()), root)
    paths = tuple(dict.fromkeys(p.resolve() for p in folders))
    owned = {p.resolve() for p in (sources if sources is not None else python_files(root))}
    imported: set[str] = set()
    tokens: list[bytes] = []
    for path in code_under_test(harness, paths, owned | {harness.resolve()}):
        source = _read(path)
        imported |= stdlib_imports(source)
        tokens += constant_tokens(source)
    return HarnessSetup(harness, tuple(dict.fromkeys(seeds)), tuple(zips), dictionary,
                        tuple(dict.fromkeys(tokens))[:MAX_TOKENS], paths,
                        tuple(sorted(imported & STDLIB_PARSERS)))
