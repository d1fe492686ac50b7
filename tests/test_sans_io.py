"""protocol/ is sans-IO: it imports no MPI, asyncio, structlog or uvloop (docs/design.md, "Processes and code layout")."""

import ast
import pathlib

FORBIDDEN = {"mpi4py", "asyncio", "structlog", "uvloop", "socket", "threading"}


def test_protocol_imports_nothing_io():
    root = pathlib.Path(__file__).resolve().parent.parent / "protocol"
    files = sorted(root.glob("*.py"))
    assert files
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
