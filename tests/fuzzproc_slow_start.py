"""A harness whose own import burns 4 s of CPU (as `atheris.instrument_all()` over a large
library does): its fuzz process runs no input for that long."""

import time

_end = time.process_time() + 4.0
while time.process_time() < _end:
    for _ in range(10_000):
        pass


def TestOneInput(data: bytes) -> None:
    if data[:4] == b"SLOW":
        raise ValueError("slow start")
