"""Imported on the first call of ``fuzzproc_targets.slow_first_use``: its import burns 0.6 s of CPU."""

import time

_end = time.process_time() + 0.6
while time.process_time() < _end:
    for _ in range(10_000):  # user time, which the fuzz process's timer counts (the clock is the kernel's)
        pass
