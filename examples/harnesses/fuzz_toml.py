"""toml: load a TOML document and dump it again (FuzzedDataProvider)."""
import sys

import atheris

with atheris.instrument_imports():
    import toml


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    text = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    try:
        doc = toml.loads(text)
    except toml.TomlDecodeError:
        return
    toml.dumps(doc)


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
