"""simplejson (pure-Python decoder): load a document (raw bytes)."""
import sys

import atheris

with atheris.instrument_imports():
    import simplejson
    from simplejson import decoder

DECODER = decoder.JSONDecoder()  # its pure-Python scanner when the C speedups are absent


def TestOneInput(data):
    try:
        simplejson.loads(data)
    except (simplejson.JSONDecodeError, UnicodeDecodeError, RecursionError):
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
