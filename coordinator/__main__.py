"""The MPI launcher: `mpirun -n N python -m symfence.coordinator --config X.toml` (rank 0 coordinates)."""

from __future__ import annotations

import sys

from symfence.coordinator import interrupt

interrupt.install()  # first thing: a Ctrl-C while the rest imports is remembered, not a traceback

from symfence.coordinator.cli import mpi_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(mpi_main())
