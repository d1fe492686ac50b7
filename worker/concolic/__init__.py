"""Embedded concolic engine for Python targets ``def target(data: bytes) -> None``.

Modules: ``symbolic`` (byte/int proxies and the branch recorder), ``instrument`` (target
loading and AST rewrite), ``execution`` (one time-limited run), ``options`` (task options),
``engine`` (generational search and solving), ``z3scope`` (a z3 context per task), ``runner``
(the executor's child process).
"""
