"""A library that is in sys.modules before the harness's import (the test's sitecustomize imports
it, as Atheris imports `ipaddress` and `urllib.parse`): its planted bug is found only if the fuzz
process instruments it in place (worker/fuzz/inplace.py)."""


class PreloadedBug(Exception):
    pass


def check(data: bytes) -> None:
    """A bug behind six byte comparisons, one at a time (libFuzzer's comparison feedback reaches
    it within seconds; blind mutation does not in a test's time)."""
    if len(data) >= 6 and data[0] == 0x50:
        if data[1] == 0x52:
            if data[2] == 0x45:
                if data[3] == 0x4C:
                    if data[4] == 0x4F:
                        if data[5] == 0x44:
                            raise PreloadedBug("reached through instrumented code")
