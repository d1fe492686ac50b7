"""`python -m symfence ...`: the same command line as the `symfence` script."""

from __future__ import annotations

import sys

from symfence.coordinator.cli import main

if __name__ == "__main__":
    sys.exit(main())
