"""AFL-style havoc mutations of byte strings, deterministic given a seed (the native mutation slice's).

``Mutator.mutate(parent, corpus)`` stacks 1..128 random operations (small stacks most often) on a
copy of ``parent``, as AFL++'s havoc stage does: bit flips, random bytes, interesting 8/16/32-bit
values (either byte order), add/subtract up to 35, block delete / clone / insert / overwrite,
dictionary tokens (insert or overwrite) and, one time in ``SPLICE_ONE_IN``, a splice with another
corpus entry first (the head of one, the tail of the other). Every result is 1..``max_len`` bytes.
The only randomness is one ``random.Random(seed)``: the same seed, parents and corpus give the same
inputs.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

INTERESTING_8 = (-128, -1, 0, 1, 16, 32, 64, 100, 127)
INTERESTING_16 = (*INTERESTING_8, -32768, -129, 128, 255, 256, 512, 1000, 1024, 4096, 32767)
INTERESTING_32 = (*INTERESTING_16, -2147483648, -100663046, -32769, 32768, 65535, 65536,
                  100663045, 2147483647)
ARITH_MAX = 35
HAVOC_STACK_POW2 = 7  # at most 2**7 operations per mutation
SPLICE_ONE_IN = 8
BLOCK_MAX = 64  # longest block an insert/clone/delete/overwrite moves (AFL's HAVOC_BLK_SMALL..LARGE)
DEFAULT_MAX_LEN = 4096

_PACK = {(2, "<"): struct.Struct("<H"), (2, ">"): struct.Struct(">H"),
         (4, "<"): struct.Struct("<I"), (4, ">"): struct.Struct(">I")}


class Mutator:
    """Havoc mutations from one seeded random stream; see the module docstring."""

    def __init__(self, seed: int | str, *, max_len: int = DEFAULT_MAX_LEN, tokens: Sequence[bytes] = ()):
        self.rng = random.Random(seed)
        self.max_len = max_len or DEFAULT_MAX_LEN
        self.tokens = [t for t in tokens if t]
        self._ops = (self._flip_bit, self._random_byte, self._interesting, self._interesting,
                     self._arith, self._arith, self._delete, self._clone, self._overwrite_block,
                     self._token, self._token)

    def mutate(self, parent: bytes, corpus: Sequence[bytes] = ()) -> bytes:
        rng = self.rng
        if len(corpus) > 1 and rng.randrange(SPLICE_ONE_IN) == 0:
            parent = self.splice(parent, corpus[rng.randrange(len(corpus))])
        buf = bytearray(parent[:self.max_len] or b"\0")
        ops = self._ops
        # 1..128 operations, small stacks most often (a large one rarely keeps a structure).
        for _ in range(1 << rng.randint(0, rng.randint(0, HAVOC_STACK_POW2))):
            if rng.randrange(16) == 0 and len(corpus):  # a block of another entry, in place
                self._from_entry(buf, corpus[rng.randrange(len(corpus))])
            else:
                ops[rng.randrange(len(ops))](buf)
            if not buf:
                buf.append(rng.randrange(256))
        del buf[self.max_len:]
        return bytes(buf)

    def splice(self, a: bytes, b: bytes) -> bytes:
        """The head of ``a`` up to a random cut and the tail of ``b`` after it (AFL's splicing)."""
        if len(a) < 2 or len(b) < 2:
            return a
        cut = self.rng.randrange(1, min(len(a), len(b)))
        return a[:cut] + b[cut:]

    # -- the operations, each on a non-empty buffer ---------------------------------------------

    def _pos(self, buf: bytearray, width: int = 1) -> int:
        return self.rng.randrange(len(buf) - width + 1)

    def _flip_bit(self, buf: bytearray) -> None:
        bit = self.rng.randrange(len(buf) * 8)
        buf[bit >> 3] ^= 0x80 >> (bit & 7)

    def _random_byte(self, buf: bytearray) -> None:
        buf[self._pos(buf)] ^= self.rng.randrange(1, 256)

    def _width(self, buf: bytearray) -> int:
        widths = [w for w in (1, 2, 4) if w <= len(buf)]
        return widths[self.rng.randrange(len(widths))]

    def _put(self, buf: bytearray, pos: int, width: int, value: int) -> None:
        if width == 1:
            buf[pos] = value & 0xFF
        else:
            order = "<" if self.rng.randrange(2) else ">"
            _PACK[(width, order)].pack_into(buf, pos, value & ((1 << (8 * width)) - 1))

    def _interesting(self, buf: bytearray) -> None:
        width = self._width(buf)
        values = {1: INTERESTING_8, 2: INTERESTING_16, 4: INTERESTING_32}[width]
        self._put(buf, self._pos(buf, width), width, values[self.rng.randrange(len(values))])

    def _arith(self, buf: bytearray) -> None:
        rng = self.rng
        width = self._width(buf)
        pos = self._pos(buf, width)
        delta = rng.randint(1, ARITH_MAX) * (1 if rng.randrange(2) else -1)
        if width == 1:
            buf[pos] = (buf[pos] + delta) & 0xFF
            return
        order = "<" if rng.randrange(2) else ">"
        packer = _PACK[(width, order)]
        (value,) = packer.unpack_from(buf, pos)
        packer.pack_into(buf, pos, (value + delta) & ((1 << (8 * width)) - 1))

    def _block_len(self, limit: int) -> int:
        return self.rng.randint(1, max(1, min(BLOCK_MAX, limit)))

    def _delete(self, buf: bytearray) -> None:
        if len(buf) < 2:
            return
        length = self._block_len(len(buf) - 1)
        pos = self._pos(buf, length)
        del buf[pos:pos + length]

    def _clone(self, buf: bytearray) -> None:
        """Insert a copy of one of its blocks, or a run of one byte, at a random place."""
        rng = self.rng
        room = self.max_len - len(buf)
        if room <= 0:
            return
        length = self._block_len(min(room, len(buf)))
        if rng.randrange(4):
            src = rng.randrange(len(buf) - length + 1)
            block = bytes(buf[src:src + length])
        else:
            block = bytes([rng.randrange(256) if rng.randrange(2) else buf[rng.randrange(len(buf))]]) * length
        at = rng.randrange(len(buf) + 1)
        buf[at:at] = block

    def _overwrite_block(self, buf: bytearray) -> None:
        rng = self.rng
        if len(buf) < 2:
            return
        length = self._block_len(len(buf) - 1)
        src, dst = self._pos(buf, length), self._pos(buf, length)
        if rng.randrange(4):
            buf[dst:dst + length] = buf[src:src + length]
        else:
            buf[dst:dst + length] = bytes([rng.randrange(256)]) * length

    def _token(self, buf: bytearray) -> None:
        rng = self.rng
        if not self.tokens:
            self._interesting(buf)
            return
        token = self.tokens[rng.randrange(len(self.tokens))]
        if rng.randrange(2) and len(buf) + len(token) <= self.max_len:
            at = rng.randrange(len(buf) + 1)
            buf[at:at] = token
        elif len(token) <= len(buf):
            at = self._pos(buf, len(token))
            buf[at:at + len(token)] = token

    def _from_entry(self, buf: bytearray, entry: bytes) -> None:
        if not entry:
            return
        length = self._block_len(min(len(entry), len(buf)))
        src = self.rng.randrange(len(entry) - length + 1)
        dst = self._pos(buf, length)
        buf[dst:dst + length] = entry[src:src + length]
