"""A harness for a library imported before it: through `atheris.instrument_all()`, as OSS-Fuzz's
harnesses of such modules do."""
import importlib
import sys

import atheris

# Named by no import statement: instrument_all() alone reaches it.
lib = importlib.import_module("preloaded_lib")

atheris.instrument_all()


def TestOneInput(data):
    lib.check(data)


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
