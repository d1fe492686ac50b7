"""How many examples the costliest property tests draw: a quarter of the deep count in a normal
run (`make test`), the whole deep count with SYMFENCE_DEEP_PROPERTIES=1.

The quarter keeps every property checked on every run (each still fails on the first
counterexample it draws, and Hypothesis replays a saved one first); the deep run is the one to
make before changing the codec, the fence or the journal:

    SYMFENCE_DEEP_PROPERTIES=1 .venv/bin/python -m pytest \
        tests/test_protocol_fuzz.py tests/test_journal.py tests/test_fdp_model.py
"""

from __future__ import annotations

import os

DEEP = os.environ.get("SYMFENCE_DEEP_PROPERTIES", "") not in ("", "0")


def examples(deep: int, floor: int = 20) -> int:
    """`deep` in a deep run, else a quarter of it (never under `floor`, nor over `deep`)."""
    return deep if DEEP else min(deep, max(deep // 4, floor))
