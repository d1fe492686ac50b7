"""How a native target's path becomes the program a process runs: one rule for every runner.

A native target is named by its path (``campaign.targets``, ``native.afl_target``, ``--target``),
and a bare name (``tlv``) means the file ``tlv`` in the working directory, as ``Path.is_file()``
checks it. ``execve`` through ``subprocess`` reads a program name without a slash as a command
to look up on ``PATH`` instead (and so do gdb's ``--args``, afl-showmap, afl-tmin and afl-fuzz),
so every place that runs a target passes ``runnable(path)``: a path naming an existing file
becomes its absolute path (so a runner may also change its working directory), anything else is
passed as given (a command on ``PATH``, or a missing file the runner reports as missing).
"""

from __future__ import annotations

import os


def runnable(path: str) -> str:
    """The argv[0] that runs the file ``path`` names (see the module docstring)."""
    if path and os.path.isfile(path):
        return os.path.abspath(path)
    return path
