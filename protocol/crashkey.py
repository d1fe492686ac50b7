"""A crash's identity as data: its type and top frames, the key the journal stores, its file-name form.

As ClusterFuzz's *crash state*: two crashes are one bug when their type and their ``TOP_FRAMES``
innermost frames in the code under test agree. ``CrashIdentity.key`` is the stable text stored
in the journal and compared (``type @ f0 > f1 > f2``); ``.sig`` is its file-name form (printable
ASCII, at most ``SIG_MAX`` characters, ends with the short hash). The rules that derive an
identity from a finding's detail are ``crashid``'s.
"""

from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass

TOP_FRAMES = 3  # ClusterFuzz's crash state depth
SIG_MAX = 64  # the longest `sig:` field of a crash file name
SHORT_HEX = 8  # hex digits of the short hash (in `sig:` and `symfence status`)
KEY_SEP = " @ "  # between the type and the frames in a key
FRAME_SEP = " > "  # between two frames in a key
UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")  # what a file-name form replaces


class IdentitySource(str, enum.Enum):
    """Where an identity's frames came from."""

    PYTHON = "python"  # a Python traceback
    SANITIZER = "sanitizer"  # an ASan/UBSan/MSan/LSan report
    BACKTRACE = "backtrace"  # a debugger's backtrace of the plain build
    EDGE_PATH = "edge-path"  # no frame: the AFL edges of the crashing input
    NONE = "none"  # no frame and no path (type only)


@dataclass(frozen=True)
class CrashIdentity:
    """A crash's dedup key: type and up to TOP_FRAMES frames, innermost first."""

    crash_type: str
    frames: tuple[str, ...] = ()
    source: IdentitySource = IdentitySource.NONE

    @property
    def key(self) -> str:
        """The stable text form (journal, comparisons): ``type @ f0 > f1 > f2``."""
        return self.crash_type + (KEY_SEP + FRAME_SEP.join(self.frames) if self.frames else "")

    @property
    def short(self) -> str:
        """A short hash of `key`."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:SHORT_HEX]

    @property
    def sig(self) -> str:
        """The file-name form: ``type-f0-f1-f2-<short>``, [A-Za-z0-9_.+-] only, <= SIG_MAX chars."""
        body = "-".join(UNSAFE.sub("_", part) for part in (self.crash_type, *self.frames))
        return f"{body[:SIG_MAX - SHORT_HEX - 1]}-{self.short}"

    @property
    def has_frames(self) -> bool:
        return bool(self.frames)

    def __str__(self) -> str:
        return self.key

    @classmethod
    def from_key(cls, key: str, source: IdentitySource = IdentitySource.NONE) -> CrashIdentity:
        """The inverse of `key` (the journal stores keys)."""
        crash_type, sep, rest = key.partition(KEY_SEP)
        return cls(crash_type, tuple(rest.split(FRAME_SEP)) if sep else (), source)
