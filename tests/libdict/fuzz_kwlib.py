"""An Atheris harness of kwlib (tests/test_fuzzproc.py)."""

import sys

import atheris

with atheris.instrument_imports():
    import kwlib


def TestOneInput(data: bytes) -> None:  # noqa: N802 - Atheris's name
    kwlib.parse(data)


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
