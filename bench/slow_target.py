"""A deliberately slow target for the abort benchmark: a few seconds per concolic run."""


def target(data: bytes) -> None:
    total = 0
    for i in range(200_000):
        total += i ^ (data[0] if data else 0)
