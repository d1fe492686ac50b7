"""jmespath: compile an expression and search a small document with it (FuzzedDataProvider)."""
import sys

import atheris

with atheris.instrument_imports():
    import jmespath
    from jmespath import exceptions

DOCUMENT = {"a": {"b": [1, 2, {"c": "x"}]}, "people": [{"name": "n", "age": 3}], "s": "text"}


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    expression = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 200))
    try:
        compiled = jmespath.compile(expression)
        if fdp.ConsumeBool():
            compiled.search(DOCUMENT)
    except (exceptions.JMESPathError, ValueError, TypeError):
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
