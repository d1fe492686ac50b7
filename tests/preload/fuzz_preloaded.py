"""A harness for a library imported before it: through `instrument_imports()` (passed over for a
module already in sys.modules)."""
import sys

import atheris

with atheris.instrument_imports():
    import preloaded_lib


def TestOneInput(data):
    preloaded_lib.check(data)


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
