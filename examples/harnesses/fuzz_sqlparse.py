"""sqlparse: parse, format or split a SQL string (FuzzedDataProvider)."""
import sys

import atheris

with atheris.instrument_imports():
    import sqlparse


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    action = fdp.ConsumeIntInRange(0, 2)
    options = {"reindent": fdp.ConsumeBool(), "keyword_case": fdp.PickValueInList(["upper", "lower", None])}
    sql = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    try:
        if action == 0:
            for statement in sqlparse.parse(sql):
                statement.get_type()
        elif action == 1:
            sqlparse.format(sql, **options)
        else:
            sqlparse.split(sql)
    except sqlparse.exceptions.SQLParseError:
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
