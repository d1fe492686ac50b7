"""symfence: a pipelined MPI coordinator for distributed concolic execution (hybrid fuzzing).

Everything symfence ships lives under this one import package (``symfence.protocol``,
``symfence.coordinator``, ``symfence.worker``), so a user's own ``protocol.py`` or
``worker.py`` beside a target can never shadow it. In the repository the sub-packages are
the top-level folders, reached from here through the symlinks ``symfence/protocol``,
``symfence/coordinator``, ``symfence/worker`` and ``symfence/tools`` (so every static tool sees
one ordinary package); the wheel maps the same folders under ``symfence/`` (see pyproject.toml and
docs/design.md, "Processes and code layout").
"""

from __future__ import annotations

__version__ = "0.2.0"
