"""The environment of a process that runs user targets: the caller's, minus the MPI launcher's.

A child that inherited ``PMI_*``/``OMPI_*``/... variables could try to join the MPI job if the
target (or something it imports) initialises MPI. Nothing is added to ``PYTHONPATH``: symfence
is found as the installed ``symfence`` package, and the user's modules exactly as in the
parent (working directory first), so neither can shadow the other.
"""

from __future__ import annotations

import os

MPI_ENV_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDRA_", "HYDI_", "MPIR_", "PRTE_", "I_MPI_",
                    "MPI_LOCAL")


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(MPI_ENV_PREFIXES)}
