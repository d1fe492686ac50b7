"""The long-lived fuzz process's side (live_child.py) and what its parent shares with it."""

HOOK_FAILED = "hook-failed.txt"  # in found/: a harness's custom mutator failed (live_child.py, executors/fuzz.py)
