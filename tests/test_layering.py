"""The layering rules of docs/design.md ("Processes and code layout"), and the size limit of a module.

- ``protocol/`` imports neither side (coordinator, worker) and no MPI, asyncio, structlog or uvloop;
- ``coordinator/`` imports worker code only in the per-rank launcher (``LAUNCHERS``);
- ``worker/`` never imports coordinator code;
- the engine seam (``SEAM``) imports no engine and no executor, and an engine (``ENGINES``)
  imports no executor: executors depend on engines, never the other way round
  (docs/design.md, "Executors");
- no product module is over ``MAX_MODULE_LINES`` lines (issue 28).

Imports are read with ``ast`` (module level and inside functions, relative ones resolved,
``importlib.import_module("...")`` with a literal name included), so a lazy import inside a
function counts as much as one at the top.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("protocol", "coordinator", "worker")
IO_LIBRARIES = frozenset({"mpi4py", "asyncio", "structlog", "uvloop"})
# The one place coordinator and worker meet: (file below the root, function).
LAUNCHERS = frozenset({("coordinator/cli.py", "_worker_rank")})
SEAM = ("worker/engine_api.py", "worker/childwire.py", "worker/childproc.py", "worker/childserve.py")
ENGINES = ("worker/concolic/", "worker/native/", "worker/realtrace/", "worker/fuzz/")


@dataclass(frozen=True)
class Import:
    path: str  # below the root, e.g. "coordinator/config.py"
    line: int
    function: str  # the outermost function the import is in ("" at module level)
    module: str  # absolute, e.g. "symfence.worker.loop"


def layer_of(module: str) -> str:
    """"protocol", "coordinator", "worker", or "" for anything else (stdlib, third party)."""
    parts = module.split(".")
    if parts[0] == "symfence":
        parts = parts[1:]
    return parts[0] if parts and parts[0] in LAYERS else ""


_ENGINE_PACKAGES = tuple(e.split("/")[1] for e in ENGINES)


def _engine_part(module: str) -> str:
    """The worker sub-package ``module`` is in ("executors", "concolic", ...), else ""."""
    parts = module.split(".")
    parts = parts[1:] if parts[0] == "symfence" else parts
    return parts[1] if len(parts) > 1 and parts[0] == "worker" else ""


def _package_of(path: str) -> list[str]:
    """``worker/concolic/engine.py`` -> ["symfence", "worker", "concolic"]."""
    parts = path[:-3].split("/")
    return ["symfence", *(parts[:-1] if parts[-1] != "__init__" else parts[:-1])]


def imports_in(root: Path, path: Path) -> list[Import]:
    rel = path.relative_to(root).as_posix()
    found: list[Import] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and not function:
                inner = child.name
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = _package_of(rel)
                    package = package[: len(package) - (child.level - 1)]
                    base = ".".join([*package, base] if base else package)
                # ``from symfence import worker`` names the layer in the imported name
                names = [base] if layer_of(base) else [f"{base}.{a.name}" for a in child.names]
            elif (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                  and child.func.attr == "import_module" and child.args
                  and isinstance(child.args[0], ast.Constant) and isinstance(child.args[0].value, str)):
                names = [child.args[0].value]
            found.extend(Import(rel, child.lineno, inner, n) for n in names if n)  # type: ignore[attr-defined]
            visit(child, inner)

    visit(ast.parse(path.read_text(), str(path)), "")
    return found


def violations(root: Path) -> list[str]:
    """Every import in ``root``'s layers that breaks a rule, as "file:line: why"."""
    broken: list[str] = []
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            for imp in imports_in(root, path):
                target = layer_of(imp.module)
                where = f"{imp.path}:{imp.line}"
                if layer == "protocol" and target in ("coordinator", "worker"):
                    broken.append(f"{where}: protocol imports {imp.module} (protocol imports no side)")
                elif layer == "protocol" and imp.module.split(".")[0] in IO_LIBRARIES:
                    broken.append(f"{where}: protocol imports {imp.module} (protocol is sans-IO)")
                elif (layer == "coordinator" and target == "worker"
                      and (imp.path, imp.function) not in LAUNCHERS):
                    broken.append(f"{where}: coordinator imports {imp.module} outside the launcher")
                elif layer == "worker" and target == "coordinator":
                    broken.append(f"{where}: worker imports {imp.module} (sides meet only in the launcher)")
                elif imp.path.startswith(ENGINES) and _engine_part(imp.module) == "executors":
                    broken.append(f"{where}: an engine imports {imp.module} (executors import engines)")
                elif imp.path in SEAM and _engine_part(imp.module) in ("executors", *_ENGINE_PACKAGES):
                    broken.append(f"{where}: the engine seam imports {imp.module}")
    return sorted(set(broken))


def test_the_tree_keeps_the_layering_rules() -> None:
    assert all((ROOT / layer).is_dir() for layer in LAYERS)
    assert violations(ROOT) == []


def test_the_launcher_is_where_the_sides_meet() -> None:
    """The exception is not dead: the launcher does import the worker (else LAUNCHERS is stale)."""
    launches = [imp for imp in imports_in(ROOT, ROOT / "coordinator" / "cli.py")
                if layer_of(imp.module) == "worker"]
    assert launches and {(i.path, i.function) for i in launches} <= LAUNCHERS


def test_each_rule_catches_a_forbidden_import(tmp_path: Path) -> None:
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
    files = {
        "protocol/a.py": "from symfence.worker.engine_api import Task\n",
        "protocol/b.py": "def f():\n    import symfence.coordinator.journal\n",
        "protocol/c.py": "from ..coordinator import campaign\n",
        "protocol/d.py": "import structlog\nimport asyncio.events\n",
        "protocol/e.py": "from symfence import worker\n",
        "coordinator/e.py": "def launch():\n    from symfence.worker.loop import Worker\n",
        "coordinator/cli.py": "def _worker_rank():\n    from symfence.worker.loop import Worker\n"
                              "def other():\n    import importlib\n"
                              "    importlib.import_module('symfence.worker.executors')\n",
        "worker/f.py": "from symfence.coordinator.outputs import finding_class\n",
        "worker/ok.py": "from symfence.protocol.messages import Status\nfrom . import g\n",
        "worker/childwire.py": "from symfence.worker.concolic.engine import ConcolicEngine\n",
        "worker/native/runner.py": ("from ..executors.base import Task\n"
                                    "from symfence.worker.engine_api import Task\n"),
        "worker/executors/concolic.py": "from symfence.worker.concolic.options import EngineOptions\n",
        "protocol/ok.py": "import msgpack\nfrom symfence.protocol.ids import Rank\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    got = violations(tmp_path)
    assert [v.split(":")[0] for v in got] == [
        "coordinator/cli.py", "coordinator/e.py", "protocol/a.py", "protocol/b.py", "protocol/c.py",
        "protocol/d.py", "protocol/d.py", "protocol/e.py", "worker/childwire.py", "worker/f.py",
        "worker/native/runner.py"], got


# Issue 28's rule: no product module over this many lines (one responsibility per module; a
# longer one is split along a real seam, not cut in half). Product: the layers, tools/ and the
# package's own top level (symfence/*.py); not tests/, bench/ or examples/.
MAX_MODULE_LINES = 700
PRODUCT = (*LAYERS, "tools")


def oversized_modules(root: Path) -> list[str]:
    """Every product module of ``root`` over MAX_MODULE_LINES, as "file: N lines"."""
    files = [p for folder in PRODUCT for p in sorted((root / folder).rglob("*.py"))]
    files += sorted((root / "symfence").glob("*.py"))  # its layer folders are symlinks: not again
    found = []
    for path in files:
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(root).as_posix()}: {lines} lines")
    return found


def test_no_product_module_is_over_the_line_limit() -> None:
    assert all((ROOT / folder).is_dir() for folder in PRODUCT)
    assert oversized_modules(ROOT) == []


def test_the_line_limit_counts_every_product_folder_and_nothing_else(tmp_path: Path) -> None:
    long, limit = "x = 1\n" * (MAX_MODULE_LINES + 1), "x = 1\n" * MAX_MODULE_LINES
    files = {
        "protocol/a.py": long, "coordinator/journal/b.py": long, "worker/concolic/c.py": long,
        "tools/d.py": long, "symfence/e.py": long,
        "worker/at_limit.py": limit,  # exactly the limit is allowed
        "tests/test_f.py": long, "bench/g.py": long, "examples/h.py": long,  # not product code
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    over = f"{MAX_MODULE_LINES + 1} lines"
    assert oversized_modules(tmp_path) == [
        f"protocol/a.py: {over}", f"coordinator/journal/b.py: {over}", f"worker/concolic/c.py: {over}",
        f"tools/d.py: {over}", f"symfence/e.py: {over}"]
