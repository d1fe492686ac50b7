"""tomli: load a TOML document (FuzzedDataProvider)."""
import sys

import atheris

with atheris.instrument_imports():
    import tomli


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    as_float = fdp.ConsumeBool()
    text = fdp.ConsumeUnicodeNoSurrogates(sys.maxsize)
    try:
        tomli.loads(text, parse_float=str if as_float else float)
    except tomli.TOMLDecodeError:
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
