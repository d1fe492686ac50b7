"""wave (the demo's first parser, examples/parsers/wave_header.py): read a RIFF/WAVE file (raw bytes)."""
import io
import sys

import atheris

with atheris.instrument_imports():
    import wave


def TestOneInput(data):
    try:
        with wave.open(io.BytesIO(data), "rb") as reader:
            reader.getparams()
            reader.readframes(reader.getnframes())
    except (wave.Error, EOFError):
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
