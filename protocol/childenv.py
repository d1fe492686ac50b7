"""The environment of a process that runs user targets: the caller's, minus the MPI launcher's.

A child that inherited ``PMI_*``/``OMPI_*``/... variables could try to join the MPI job if the
target (or something it imports) initialises MPI. Nothing is added to ``PYTHONPATH`` but the
folders a campaign names (``put_first_on_path``): symfence is found as the installed ``symfence``
package, and the user's modules exactly as in the parent (working directory first), so neither
can shadow the other (docs/design.md, "Processes and code layout"). The one definition for both sides: the coordinator's start-up check imports
the targets in such an environment, the worker's child processes run in it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

MPI_ENV_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDRA_", "HYDI_", "MPIR_", "PRTE_", "I_MPI_",
                    "MPI_LOCAL")


def put_first_on_path(folders: list[str]) -> None:
    """A campaign's `campaign.pythonpath`: first on this process's ``sys.path`` and on the
    ``PYTHONPATH`` its children (ranks, replays) inherit. The one thing added, and only when a
    campaign names it (the drop-in command names its harness's folder)."""
    if not folders:
        return
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in folders]
    os.environ["PYTHONPATH"] = os.pathsep.join([*folders, *rest])
    sys.path[:0] = [p for p in folders if p not in sys.path]


def child_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without the MPI launcher's variables."""
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items() if not k.startswith(MPI_ENV_PREFIXES)}
