"""The MPI launcher: `mpirun -n N python -m symfence.coordinator --config X.toml` (rank 0 coordinates)."""

from __future__ import annotations

import sys

from symfence.coordinator.cli import mpi_main

if __name__ == "__main__":
    sys.exit(mpi_main())
