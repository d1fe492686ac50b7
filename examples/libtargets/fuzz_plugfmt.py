"""Harness (OSS-Fuzz form) for plugfmt: the bug is in a plugin the library imports on first use."""
import sys

import atheris

with atheris.instrument_imports():
    import plugfmt


def TestOneInput(data):
    try:
        plugfmt.load(data)
    except plugfmt.FormatError:
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
