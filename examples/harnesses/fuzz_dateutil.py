"""python-dateutil: parse a date string, maybe fuzzily, maybe day-first (FuzzedDataProvider)."""
import sys

import atheris

with atheris.instrument_imports():
    from dateutil import parser


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    fuzzy, dayfirst = fdp.ConsumeBool(), fdp.ConsumeBool()
    text = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    try:
        parser.parse(text, fuzzy=fuzzy, dayfirst=dayfirst)
    except (parser.ParserError, OverflowError, ValueError):
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
