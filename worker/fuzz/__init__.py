"""The long-lived fuzz process's side (live_child.py) and what its parent shares with it."""

HOOK_FAILED = "hook-failed.txt"  # in found/: a harness's custom mutator failed (live_child.py, executors/fuzz.py)
# In found/: the SHA-1s of inputs that leave the fuzzer's corpus folder (one per line): inputs that
# hung or were cut short (each load of the corpus would run them to the time-out again). The
# parent applies it at every answer and before a restart.
DROP_LIST = "drop.list"

# The file both map (``counter_path``): the execution count (8 bytes), the length + 1 of the input
# the target is running (8 bytes; 0 between inputs, or for one longer than LAST_INPUT_MAX), then
# that input. When the process dies without libFuzzer's report (native code's _exit, the kernel's
# OOM killer), the parent still knows which input it was running.
LAST_INPUT_MAX = 1 << 16
SHARED_BYTES = 16 + LAST_INPUT_MAX
