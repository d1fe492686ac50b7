"""Harness (OSS-Fuzz form) for stampfmt: run it plainly with ``python fuzz_stamp.py -max_total_time=600``."""
import sys

import atheris

with atheris.instrument_imports():
    import stampfmt


def TestOneInput(data):
    try:
        stampfmt.read_record(data)
    except stampfmt.StampError:
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
