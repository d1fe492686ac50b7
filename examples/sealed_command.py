"""Demo target whose bug needs both stages: a hash-sealed header (fuzzer) and a mixed 32-bit key (engine).

Frame: an 8-byte header, an 8-byte command key (two u32 little-endian halves), then any
payload. The header carries a 12-bit proof-of-work seal: BLAKE2s of the header must start with
12 zero bits, else the frame is dropped. Each key half is mixed (two xor-shift-multiply rounds,
a bijection on 32 bits) and compared with a constant; the "maintenance" key hits the planted bug.

- Mutation alone passes the seal about once in 4,096 header mutations, but guessing a key half
  is a 2**-32 chance per try (Atheris ran 25 million inputs a minute on it here), and
  libFuzzer's compare-operand substitution inserts the constant, not the key that mixes to it.
- The concolic engine alone cannot pass the seal: the hash runs in C on concrete bytes, so no
  branch of it is ever recorded and there is nothing to solve. Given a sealed frame, though, it
  solves each key half in one query (~10 ms) and leaves the header untouched.
So only the hybrid (the fuzzer's sealed frame handed to the engine) reaches the bug.
"""

import hashlib

HEADER = 8
MAINTENANCE = (0x5EA1ED42, 0x0B57AC1E)  # the mixed key halves that open the maintenance path


class SealedCommandBug(Exception):
    """Planted bug: a sealed frame carrying the maintenance key."""


def mix(key):
    """A 32-bit bijection (xor-shift-multiply, constants below 2**31 so products stay in 64 bits)."""
    key = ((key >> 16) ^ key) * 0x45D9F3B & 0xFFFFFFFF
    key = ((key >> 16) ^ key) * 0x45D9F3B & 0xFFFFFFFF
    return (key >> 16) ^ key


def sealed(header: bytes) -> bool:
    digest = hashlib.blake2s(header).digest()
    return digest[0] == 0 and digest[1] < 16


def target(data: bytes) -> None:
    if len(data) < HEADER + 8:
        return
    if not sealed(data[:HEADER]):
        return  # unsealed frame: dropped
    low = int.from_bytes(data[HEADER:HEADER + 4], "little")
    high = int.from_bytes(data[HEADER + 4:HEADER + 8], "little")
    if mix(low) == MAINTENANCE[0] and mix(high) == MAINTENANCE[1]:
        raise SealedCommandBug(f"sealed frame with maintenance key {high:08x}{low:08x}")
