"""pyasn1: BER-decode the raw input (raw bytes)."""
import sys

import atheris

with atheris.instrument_imports():
    from pyasn1.codec.ber import decoder
    from pyasn1.error import PyAsn1Error


def TestOneInput(data):
    try:
        decoder.decode(data)
    except (PyAsn1Error, ValueError, TypeError):
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
