"""Polling back-off: spin (yield) briefly after progress, then sleep exponentially up to a cap."""

from __future__ import annotations

import os

SPINS = 64  # yields after progress before the first sleep, when every rank has a core of its own

# What launchers export as the number of ranks on this host (MPICH's Hydra, Open MPI's prte).
_LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")


def local_ranks(environ: dict[str, str] | None = None) -> int | None:
    """How many ranks of this job run on this host, from the launcher's environment (or None)."""
    env = os.environ if environ is None else environ
    for name in _LOCAL_SIZE_VARS:
        try:
            return max(1, int(env[name]))
        except (KeyError, ValueError):
            continue
    return None


def ranks_per_core(ranks: int | None = None, cores: int | None = None) -> float:
    """This host's ranks per core (1.0 when the launcher does not say)."""
    ranks = local_ranks() if ranks is None else ranks
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) \
        if cores is None else cores
    return 1.0 if ranks is None else ranks / max(1, cores)


def crowded(ranks: int | None = None, cores: int | None = None) -> bool:
    """More than two ranks per core (e.g. 64 ranks on 2 cores): every wake-up of an idle or
    waiting rank takes a turn from a rank with work, so ranks spin never and sleep longer."""
    return ranks_per_core(ranks, cores) > 2.0


def spins_for_host(ranks: int | None = None, cores: int | None = None) -> int:
    """Yields to spin before sleeping: SPINS, or 0 on a crowded host (`crowded`).

    A rank that spins (sched_yield) stays runnable and takes turns from ranks with a task
    running; sleeping at once leaves the cores to them."""
    return 0 if crowded(ranks, cores) else SPINS


class Backoff:
    """Tells a polling loop how long to wait after a poll that found nothing.

    After progress (`reset`), the first `spins` empty polls return 0.0 (yield the CPU, do not
    sleep: `time.sleep` below ~100 us is not honoured on these VMs). After that the delay starts
    at `cap_s / 1024` (as mpi4py.futures does) and doubles up to `cap_s`.
    """

    def __init__(self, cap_s: float = 0.002, spins: int = SPINS) -> None:
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

    @property
    def delay(self) -> float:
        """The last delay handed out (0.0 while spinning or after progress)."""
        return self._delay

    def next_delay(self) -> float:
        self._idle += 1
        if self._idle <= self.spins:
            return 0.0
        self._delay = self._floor if self._delay == 0.0 else min(self.cap_s, self._delay * 2)
        return self._delay
