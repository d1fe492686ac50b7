"""stampfmt: a sealed record with a text stamp, the library under test of ``fuzz_stamp.py``.

A record is a 4-byte magic ``b"\\x89STP"``, a 4-byte key that must hash (a 32-bit
xorshift mix) to a fixed value, then an ASCII stamp ``v<3 digits>-<2-4 letters>``
checked with ``re.fullmatch``. The planted ``StampBug`` needs the right key (libFuzzer sees the
compared hash, not the key: it cannot invert the mix), a stamp in the regular language (C code
to Atheris; no comparison hook tells it the format) and stamp number 418 with a ``zq`` suffix.
The concolic engine solves the mix and the regular expression (z3) once this package is
rewritten. Built for issue 27's "a bug the engine finds that Atheris does not in 10 minutes".
"""

from stampfmt.record import StampBug, StampError, read_record

__all__ = ["StampBug", "StampError", "read_record"]
