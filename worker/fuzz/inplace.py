"""Instruments, in the fuzz process, library code that was imported before the harness.

`atheris.instrument_imports()` instruments a module when it is imported inside the block; a module
already in `sys.modules` is passed over. Python's start-up, Atheris itself (`ipaddress`,
`urllib.parse`, `tokenize`, `textwrap`, `re`, ...) and the fuzz process's own code import a good
part of the standard library before the harness runs, so a harness that fuzzes such a module
through `instrument_imports()` gives libFuzzer no coverage of it: an `ipaddress` harness ran
7 million executions in a 35 s campaign and kept no input. OSS-Fuzz harnesses call
`atheris.instrument_all()` for this; the fuzz process used to make that call a no-op.

`instrument_loaded` patches the code of such functions in place (`atheris.instrument_func`, as
`instrument_all` does): every Python function and method defined in a module that `wanted`
accepts. Code that is instrumented already is left as it is (Atheris marks it). The fuzz process
(live_child.py) calls it after the harness's import for the harness's packages (what
`harness_imports` names), and for every module but symfence's and Atheris's when the harness
asked for `instrument_all()`.
"""

from __future__ import annotations

import gc
import sys
import types
from typing import Callable

import atheris

NEVER = ("symfence", "atheris")  # the fuzz process's own code: its coverage is not the target's


def in_packages(packages: list[str]) -> Callable[[str], bool]:
    """A module-name test: the module is one of `packages` or inside one."""
    prefixes = tuple(p + "." for p in packages)
    names = frozenset(packages)
    return lambda name: name in names or name.startswith(prefixes)


def outside(packages: tuple[str, ...] = NEVER) -> Callable[[str], bool]:
    """A module-name test: anything but `packages` (and their submodules)."""
    inside = in_packages(list(packages))
    return lambda name: not inside(name)


def instrument_loaded(wanted: Callable[[str], bool]) -> tuple[int, int]:
    """Instrument in place every loaded Python function whose module `wanted` accepts (and is
    in `sys.modules`): returns (functions patched or already instrumented, failures)."""
    done = failed = 0
    for obj in gc.get_objects():
        if type(obj) is not types.FunctionType:  # noqa: E721 - exactly functions, nothing native
            continue
        module = obj.__module__
        if not isinstance(module, str) or module not in sys.modules or not wanted(module):
            continue
        try:
            atheris.instrument_func(obj)
            done += 1
        except Exception:  # noqa: BLE001 - as instrument_all: a function that cannot be patched stays plain
            failed += 1
    return done, failed
