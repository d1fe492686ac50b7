"""Polling back-off: spin (yield) briefly after progress, then sleep exponentially up to a cap."""

from __future__ import annotations


class Backoff:
    """Tells a polling loop how long to wait after a poll that found nothing.

    After progress (`reset`), the first `spins` empty polls return 0.0 (yield the CPU, do not
    sleep: `time.sleep` below ~100 us is not honoured on these VMs). After that the delay starts
    at `cap_s / 1024` (as mpi4py.futures does) and doubles up to `cap_s`.
    """

    def __init__(self, cap_s: float = 0.002, spins: int = 64) -> None:
        if cap_s <= 0 or spins < 0:
            raise ValueError("cap_s must be > 0 and spins >= 0")
        self.cap_s = cap_s
        self.spins = spins
        self._floor = cap_s / 1024
        self._idle = 0
        self._delay = 0.0

    def reset(self) -> None:
        self._idle = 0
        self._delay = 0.0

    @property
    def sleeping(self) -> bool:
        return self._idle > self.spins

    def next_delay(self) -> float:
        self._idle += 1
        if self._idle <= self.spins:
            return 0.0
        self._delay = self._floor if self._delay == 0.0 else min(self.cap_s, self._delay * 2)
        return self._delay
