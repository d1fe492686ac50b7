"""Where a hanging Python call is stuck: stacks sampled past its deadline, and the frames common to all.

A hang's identity (protocol/pycrash.py) is the stack that stays active while it hangs. The
plain replay's child (worker/concolic/replay.py) and the minimizer (worker/triage/minimize_child.py)
sample the stack at each timer tick past the deadline, then raise their time-out. Each frame's
line is read when it is sampled: read after the time-out exception had unwound, it named the
``except`` clause that caught it (bitstring's hang was reported at the harness's ``except``
line, not at the call that hung).
"""

from __future__ import annotations

import traceback
from types import FrameType

from symfence.protocol.pycrash import HANG_STACK_MARK

HANG_SAMPLES = 5  # stacks sampled 20 ms apart after the deadline


class HangSampler:
    """Up to `limit` stacks, outermost frame first, each frame with its line at that moment.
    Frames of `skip_file` (the replay child's own script, ``<string>``) are left out."""

    def __init__(self, limit: int = HANG_SAMPLES, skip_file: str | None = None) -> None:
        self.limit = limit
        self.skip_file = skip_file
        self.samples: list[list[tuple[FrameType, int]]] = []

    def sample(self, frame: FrameType | None) -> bool:
        """Take one stack from `frame` outwards; False once `limit` are taken (time to stop it)."""
        if len(self.samples) >= self.limit or frame is None:
            return False
        stack: list[tuple[FrameType, int]] = []
        while frame is not None:
            if frame.f_code.co_filename != self.skip_file:
                stack.append((frame, frame.f_lineno))
            frame = frame.f_back
        self.samples.append(stack[::-1])
        return True

    def report(self) -> str:
        """HANG_STACK_MARK and the frames active at every sample (the same activation), each at
        its line in the last sample; the samples are dropped."""
        active: list[tuple[FrameType, int]] = []
        for level in zip(*self.samples):
            if any(f is not level[0][0] for f, _ in level):
                break
            active.append(level[-1])
        self.samples.clear()
        return HANG_STACK_MARK + "\n" + "".join(traceback.StackSummary.extract(active).format())
