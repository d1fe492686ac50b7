"""symfence: a pipelined MPI coordinator for distributed concolic execution (hybrid fuzzing).

Everything symfence ships lives under this one import package (``symfence.protocol``,
``symfence.coordinator``, ``symfence.worker``), so a user's own ``protocol.py`` or
``worker.py`` beside a target can never shadow it. In the repository the sub-packages are
the top-level folders; the wheel maps them under ``symfence/`` (see pyproject.toml).
"""

from __future__ import annotations

import os as _os

__version__ = "0.2.0"

_here = _os.path.dirname(_os.path.abspath(__file__))
if not _os.path.isdir(_os.path.join(_here, "protocol")):
    # Running from a source checkout (editable install or the repository on sys.path): the
    # sub-packages are the checkout's top-level folders, next to this one.
    __path__.append(_os.path.dirname(_here))  # type: ignore[name-defined]  # noqa: F821
