"""The STRC format. Its import-time check holds for plain Python only (the engine's rewritten
copy of a module has builtins of its own): the engine imports it plain and goes on."""
import builtins

if __builtins__ is not builtins.__dict__:
    raise RuntimeError("strictplugin: unexpected builtins")


def accept(prefix: bytes) -> bool:
    return prefix == b"STRC"


def read(data: bytes) -> str:
    return "strict"
