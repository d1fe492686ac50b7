"""Address-space limits (RLIMIT_AS) of the processes that run a Python target.

An input that allocates past the limit gets a MemoryError at once (an ``oom`` finding, the same
in every process that runs it) instead of filling memory until something outside kills the
process or swapping until its time limit makes it look like a hang.
"""

from __future__ import annotations

import resource
from collections.abc import Mapping
from typing import Any

from symfence.protocol.options import EngineOptions

DEFAULT_MB = EngineOptions().memory_limit_mb  # the engine's default (libFuzzer's -rss_limit_mb's too)


def limit_of(options: Mapping[str, Any]) -> int:
    """The memory limit (MB, 0 = none) of a task's options: the engine's ``memory_limit_mb``, the
    fuzz stage's ``rss_limit_mb``, else the default: what every process that replays one of its
    inputs (the tracer, the minimizer) applies, so an input is out of memory in each of them alike."""
    return int(options.get("memory_limit_mb", options.get("rss_limit_mb", DEFAULT_MB)))


def apply_memory_limit(limit_mb: int) -> None:
    """Limit this process's address space (RLIMIT_AS, like AFL++'s -m) to ``limit_mb``; 0 = none.

    A target that allocates past it gets a MemoryError at once (an ``oom`` finding) instead of
    swapping until its time limit makes it look like a hang."""
    soft = resource.RLIM_INFINITY if limit_mb <= 0 else limit_mb << 20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY and (soft == resource.RLIM_INFINITY or soft > hard):
        soft = hard
    if resource.getrlimit(resource.RLIMIT_AS)[0] != soft:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def limit_growth(rss_limit_mb: int) -> bool:
    """Let the target map at most ``rss_limit_mb`` MB past what the process holds now (RLIMIT_AS):
    an input that allocates past libFuzzer's -rss_limit_mb gets a MemoryError at once, a finding
    like any exception (the engine and the replays limit their address space the same way), instead
    of filling memory for seconds until libFuzzer's once-a-second check ends the process, only for
    the next restart to be ended by the next such input, one mutation away. True once applied
    (False with no limit, or where /proc/self/status does not tell the process's size)."""
    if rss_limit_mb <= 0:
        return False
    try:
        with open("/proc/self/status") as fh:
            kb = {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in fh)
                  if k in ("VmSize", "VmRSS")}
    except OSError:
        kb = {}
    if len(kb) < 2:
        return False
    soft = (kb["VmSize"] + max(rss_limit_mb * 1024 - kb["VmRSS"], 64 << 10)) << 10  # the RSS counts too
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    return True
