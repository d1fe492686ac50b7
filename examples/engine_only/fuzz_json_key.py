"""Harness (OSS-Fuzz form): a JSON request whose bug needs one key and value, ``{"cmd": ["run", 3]}``.

Run it plainly with ``python fuzz_json_key.py -max_total_time=600``. The standard library's
``json`` parses the request; with Atheris its C scanner (``_json``) gives libFuzzer no coverage
to climb, and a random mutation must write the whole request at once. The concolic engine runs
json's Python scanner and follows the key and the values into the comparison (docs/engine.md).
"""
import sys

import atheris

with atheris.instrument_imports():
    import json


class JsonCommandBug(Exception):
    """The planted bug: the request ``{"cmd": ["run", 3]}``."""


def TestOneInput(data):
    try:
        request = json.loads(data)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return
    if request == {"cmd": ["run", 3]}:
        raise JsonCommandBug(repr(request))


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
