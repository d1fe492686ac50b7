"""pefile: parse a Windows PE file from raw bytes and dump what it found."""
import sys

import atheris

with atheris.instrument_imports():
    import pefile


def TestOneInput(data):
    try:
        pefile.PE(data=data).dump_info()
    except pefile.PEFormatError:
        return


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
