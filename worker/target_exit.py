"""A target that ends its own process (``os._exit``) becomes a crash with its Python stack, not a dead child.

``os._exit`` skips every handler: under Atheris it ends the fuzzing run without an artifact,
and in symfence's children it left nothing to tell which input did it. The long-lived fuzz
process restarted about eight times a second on a corpus entry that called it (650 executions
in a 20 s campaign), the minimizer died on the crash, and the plain replay read the target's
own exit status as its verdict (``os._exit(0)`` looked like a clean run, 10 like a crash).

``guard()``, in every process that runs a target (``worker.childserve``'s children and the plain
replay), makes ``os._exit(status)`` raise `TargetExited` there, which each of them already
treats as what the target raised: a crash whose traceback names the line that called it. A
process the target forks still exits as asked, and symfence's own code calls `real_exit`.
"""

from __future__ import annotations

import os
from typing import NoReturn

real_exit = os._exit


class TargetExited(BaseException):
    """Raised where the target called ``os._exit`` (a BaseException: a harness's ``except
    Exception`` does not hide it, as nothing hides the real call)."""


def guard() -> None:
    """From now on ``os._exit`` in this process raises `TargetExited` (in a forked child it exits)."""
    pid = os.getpid()

    def _exit(status: int) -> NoReturn:
        if os.getpid() != pid:
            real_exit(status)
        raise TargetExited(f"the target ended its process: os._exit({status!r})")

    os._exit = _exit
