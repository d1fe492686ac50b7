"""Harness (OSS-Fuzz form) for magiclib: the bug is in the library it imports, not here."""
import sys

import atheris

with atheris.instrument_imports():
    import magiclib
    from magiclib.header import HeaderError


def TestOneInput(data):
    try:
        magiclib.read_header(data)
    except HeaderError:
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
