"""Harness: ``wave`` reading a RIFF/WAVE file's chunks, format header and frames (via ``struct``).

Documented errors: ``wave.Error`` for a file that is not a valid WAVE file and ``EOFError`` for
one that ends early.
"""

import io
import wave

MODULES = ("wave",)


def target(data: bytes) -> None:
    try:
        with wave.open(io.BytesIO(data), "rb") as reader:
            reader.getparams()
            reader.readframes(reader.getnframes())
    except (wave.Error, EOFError):
        pass
