"""idna: encode or decode a domain name, with or without UTS 46 mapping (FuzzedDataProvider)."""
import sys

import atheris

with atheris.instrument_imports():
    import idna


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    decode, uts46 = fdp.ConsumeBool(), fdp.ConsumeBool()
    name = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    try:
        if decode:
            idna.decode(name, uts46=uts46)
        else:
            idna.encode(name, uts46=uts46)
    except (idna.IDNAError, UnicodeError):
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
