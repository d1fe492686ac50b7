"""Random-mutation fuzzing baseline (AFL-style havoc, blind or coverage-guided) for the Python demo targets.

One process, no MPI, no solver. Every target starts from the seed ``b"\\x00"``; each execution
is ``havoc(parent)`` (a stack of 1..16 AFL-style mutations: bit flips, bytes/words/dwords set
to AFL's interesting values, small arithmetic, random bytes, block deletes, inserts and
overwrites), preceded with probability 1/8 by a splice of two corpus entries.

- ``blind``: the corpus is the seed forever (a splice partner is a fresh mutant of the seed).
- ``guided``: an input whose coverage has new bits (a new edge or a new AFL hit-count bucket,
  ``CoverageMap.merge`` > 0) joins the corpus; parents are picked uniformly from it.

Coverage is measured exactly as the concolic campaign measures it: each input runs through the
engine's own trace-mode execution (``worker.concolic.execution.execute(..., symbolic=False)``
on the AST-instrumented target), whose edges are ``protocol.coverage.edges_from_sites`` over
the input-dependent branch locations, so edge counts compare 1:1 with the campaign's
``edges_found`` (one map per target here; the total is the union). Like the coordinator,
traces of crashing or hanging inputs are not merged. ``plain=True`` (blind only) instead calls
the uninstrumented target directly: a call is ~50x cheaper, but with mutation in Python
costing as much as a traced run that is only ~2x more execs/s, and no coverage (edges None). Targets are fuzzed round-robin in 20 ms slices for ``budget_s`` each, so ``found_s``
(time to a target's first crash) is on one clock since the run started, like the campaign's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from symfence.protocol.coverage import CoverageMap
from symfence.worker.concolic.execution import ExecTimeout, execute, own_alarm_signal, time_limit
from symfence.worker.concolic.instrument import load_target
from symfence.worker.executors.base import ExitKind

ROOT = Path(__file__).resolve().parent.parent
SEED = b"\x00"
MAX_LEN = 256
SPLICE_P = 1 / 8
HAVOC_STACK_POW2 = 4  # 1..16 stacked mutations (AFL: 2..128; Python mutation is costly)
SLICE_S = 0.02
MAX_BRANCHES = 2000  # same as configs/concolic.toml

INTERESTING_8 = (-128, -1, 0, 1, 16, 32, 64, 100, 127)
INTERESTING_16 = (*INTERESTING_8, -32768, -129, 128, 255, 256, 512, 1000, 1024, 4096, 32767)
INTERESTING_32 = (*INTERESTING_16, -2147483648, -100663046, -32769, 32768, 65535, 65536,
                  100663045, 2147483647)

Mutator = Callable[[bytearray, random.Random], None]


# -- mutators: each changes ``buf`` in place (a no-op where the buffer is too short) ----------


def _block_len(rng: random.Random, limit: int) -> int:
    """A block length in 1..limit, biased to small blocks as AFL's ``choose_block_len``."""
    return rng.randint(1, max(1, min(limit, rng.choice((4, 16, 32)))))


def flip_bit(buf: bytearray, rng: random.Random) -> None:
    if buf:
        bit = rng.randrange(len(buf) * 8)
        buf[bit >> 3] ^= 0x80 >> (bit & 7)


def set_interesting_8(buf: bytearray, rng: random.Random) -> None:
    if buf:
        buf[rng.randrange(len(buf))] = rng.choice(INTERESTING_8) & 0xFF


def _set_word(buf: bytearray, rng: random.Random, size: int, values: tuple[int, ...]) -> None:
    if len(buf) >= size:
        pos = rng.randrange(len(buf) - size + 1)
        order = rng.choice(("little", "big"))
        buf[pos : pos + size] = (rng.choice(values) % (1 << (8 * size))).to_bytes(size, order)


def set_interesting_16(buf: bytearray, rng: random.Random) -> None:
    _set_word(buf, rng, 2, INTERESTING_16)


def set_interesting_32(buf: bytearray, rng: random.Random) -> None:
    _set_word(buf, rng, 4, INTERESTING_32)


def arith_8(buf: bytearray, rng: random.Random) -> None:
    if buf:
        pos = rng.randrange(len(buf))
        buf[pos] = (buf[pos] + rng.choice((-1, 1)) * rng.randint(1, 35)) & 0xFF


def random_byte(buf: bytearray, rng: random.Random) -> None:
    if buf:
        buf[rng.randrange(len(buf))] ^= rng.randint(1, 255)  # always a different value


def delete_block(buf: bytearray, rng: random.Random) -> None:
    if len(buf) >= 2:
        size = _block_len(rng, len(buf) - 1)
        pos = rng.randrange(len(buf) - size + 1)
        del buf[pos : pos + size]


def insert_block(buf: bytearray, rng: random.Random) -> None:
    """Insert a copy of a block of ``buf`` (3/4) or a run of one byte value (1/4)."""
    if buf and rng.random() < 0.75:
        size = _block_len(rng, len(buf))
        src = rng.randrange(len(buf) - size + 1)
        block = buf[src : src + size]
    else:
        block = bytearray([rng.randrange(256)]) * _block_len(rng, 32)
    pos = rng.randint(0, len(buf))
    buf[pos:pos] = block


def overwrite_block(buf: bytearray, rng: random.Random) -> None:
    """Overwrite a block with a copy of another block (3/4) or with one byte value (1/4)."""
    if len(buf) < 2:
        return
    size = _block_len(rng, len(buf) - 1)
    dst = rng.randrange(len(buf) - size + 1)
    if rng.random() < 0.75:
        src = rng.randrange(len(buf) - size + 1)
        buf[dst : dst + size] = buf[src : src + size]
    else:
        buf[dst : dst + size] = bytes([rng.randrange(256)]) * size


MUTATORS: tuple[Mutator, ...] = (flip_bit, set_interesting_8, set_interesting_16, set_interesting_32,
                                 arith_8, random_byte, random_byte, delete_block, insert_block,
                                 overwrite_block)


def havoc(data: bytes, rng: random.Random, max_len: int = MAX_LEN) -> bytes:
    """``data`` after a stack of 1..16 random mutations, truncated to ``max_len``."""
    buf = bytearray(data)
    for _ in range(1 << rng.randrange(HAVOC_STACK_POW2 + 1)):
        rng.choice(MUTATORS)(buf, rng)
    return bytes(buf[:max_len])


def splice(a: bytes, b: bytes, rng: random.Random) -> bytes:
    """A head of ``a`` joined to the tail of ``b`` at one random cut point."""
    cut = rng.randint(0, min(len(a), len(b)))
    return a[:cut] + b[cut:]


# -- executing one input ---------------------------------------------------------------------


@dataclass(frozen=True)
class Exec:
    kind: ExitKind
    exception: str  # qualified exception type of a crash, else ""
    trace: dict[int, int] | None  # None when not measured (plain mode)


def _exception_name(detail: str) -> str:
    """``module.Type`` from the last line of a formatted traceback."""
    last = next((line for line in reversed(detail.splitlines()) if line.strip()), "?")
    return last.split(":", 1)[0].strip()


def traced_runner(spec: str, timeout_s: float) -> Callable[[bytes], Exec]:
    """Runs the instrumented target through the engine's trace mode (campaign-equal coverage)."""
    target = load_target(spec)

    def run(data: bytes) -> Exec:
        r = execute(target, data, symbolic=False, timeout_s=timeout_s, max_branches=MAX_BRANCHES)
        name = _exception_name(r.detail) if r.kind is ExitKind.CRASH else ""
        return Exec(r.kind, name, r.trace if r.kind is ExitKind.OK else {})

    return run


def plain_runner(spec: str, timeout_s: float) -> Callable[[bytes], Exec]:
    """Calls the uninstrumented target directly: fastest, no coverage."""
    module, _, name = spec.partition(":")
    target = getattr(importlib.import_module(module), name)

    def run(data: bytes) -> Exec:
        try:
            with time_limit(timeout_s):
                target(data)
        except ExecTimeout:
            return Exec(ExitKind.HANG, "", None)
        except BaseException as exc:  # noqa: BLE001 - anything the target raises is a crash
            return Exec(ExitKind.CRASH, f"{type(exc).__module__}.{type(exc).__qualname__}", None)
        return Exec(ExitKind.OK, "", None)

    return run


# -- one target's fuzzing state and the round-robin driver -----------------------------------


@dataclass
class Crash:
    exception: str
    found_s: float  # since the run started
    execs: int  # this target's executions up to and including the crashing one
    input_hex: str


@dataclass
class TargetResult:
    target: str
    execs: int = 0
    time_s: float = 0.0  # time spent on this target
    edges: int | None = None
    corpus: int = 1
    hangs: int = 0
    crashes: list[Crash] = field(default_factory=list)  # first input of each exception type

    @property
    def first_crash(self) -> Crash | None:
        return self.crashes[0] if self.crashes else None


@dataclass
class BaselineResult:
    mode: str  # "blind", "guided" or "blind-plain"
    budget_s: float  # per target
    seed: int
    wall_s: float
    targets: list[TargetResult]
    edges: int | None  # union over targets
    execs: int
    execs_per_s: float

    def to_dict(self) -> dict:
        return asdict(self)


class _Fuzzer:
    def __init__(self, spec: str, run: Callable[[bytes], Exec], guided: bool, rng: random.Random):
        self.result = TargetResult(spec)
        self.run = run
        self.guided = guided
        self.rng = rng
        self.corpus: list[bytes] = [SEED]
        self.coverage = CoverageMap()
        self.measured = False
        self._execute(SEED, 0.0)

    def _next_input(self) -> bytes:
        rng = self.rng
        parent = rng.choice(self.corpus)
        if rng.random() < SPLICE_P:
            other = rng.choice(self.corpus)
            if other == parent:  # the blind corpus has only the seed: splice with a fresh mutant
                other = havoc(other, rng)
            parent = splice(parent, other, rng)
        return havoc(parent, rng)

    def _execute(self, data: bytes, now_s: float) -> None:
        res = self.result
        out = self.run(data)
        res.execs += 1
        if out.trace is not None:
            self.measured = True
            if self.coverage.merge(out.trace) and self.guided:
                self.corpus.append(data)
        if out.kind is ExitKind.CRASH and all(c.exception != out.exception for c in res.crashes):
            res.crashes.append(Crash(out.exception, round(now_s, 4), res.execs, data.hex()))
        elif out.kind is ExitKind.HANG:
            res.hangs += 1

    def slice(self, t0: float, until: float) -> None:
        """Fuzz until the monotonic clock passes ``until`` (checked every 16 executions)."""
        start = time.monotonic()
        now = start
        while now < until:
            for _ in range(16):
                self._execute(self._next_input(), now - t0)
            now = time.monotonic()
        self.result.time_s += now - start

    def finish(self) -> TargetResult:
        self.result.edges = len(self.coverage.edges_found()) if self.measured else None
        self.result.corpus = len(self.corpus)
        return self.result


def run_baseline(targets: list[str], budget_s: float, *, guided: bool, seed: int = 0,
                 plain: bool = False, exec_timeout_s: float = 1.0) -> BaselineResult:
    """Fuzz ``targets`` round-robin, ``budget_s`` seconds each, and report per target and in total."""
    if plain and guided:
        raise ValueError("plain execution measures no coverage, so it cannot be guided")
    make = plain_runner if plain else traced_runner
    runners = [make(spec, exec_timeout_s) for spec in targets]  # load (instrument) before the clock
    rng = random.Random(seed)
    t0 = time.monotonic()
    fuzzers = [_Fuzzer(spec, run, guided, rng) for spec, run in zip(targets, runners)]
    end = t0 + budget_s * len(targets)
    now = t0
    while now < end:
        for f in fuzzers:
            f.slice(t0, min(time.monotonic() + SLICE_S, end))
        now = time.monotonic()
    wall = now - t0
    results = [f.finish() for f in fuzzers]
    edges = None if plain else len(set().union(*(f.coverage.edges_found() for f in fuzzers)))
    execs = sum(r.execs for r in results)
    mode = "blind-plain" if plain else ("guided" if guided else "blind")
    return BaselineResult(mode, budget_s, seed, round(wall, 3), results, edges, execs,
                          round(execs / wall, 1))


def demo_targets() -> list[str]:
    """The targets of configs/concolic.toml."""
    return tomllib.loads((ROOT / "configs" / "concolic.toml").read_text())["campaign"]["targets"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=10.0, help="seconds per target (default 10)")
    p.add_argument("--mode", choices=("blind", "guided", "both"), default="both")
    p.add_argument("--plain", action="store_true", help="blind only: uninstrumented target, no coverage")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--targets", nargs="+", default=None, help="module:function (default: concolic.toml)")
    p.add_argument("--json", action="store_true", help="print the full results as JSON")
    args = p.parse_args(argv)
    own_alarm_signal()  # this process uses SIGALRM for nothing else
    targets = args.targets or demo_targets()
    modes = {"blind": [False], "guided": [True], "both": [False, True]}[args.mode]
    if args.plain:
        modes = [False]
    results = [run_baseline(targets, args.budget, guided=g, seed=args.seed, plain=args.plain)
               for g in modes]
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
        return
    for r in results:
        print(f"{r.mode}: {r.budget_s:g} s per target, {r.execs:,} execs, {r.execs_per_s:,.0f} execs/s, "
              f"edges {r.edges}")
        for t in r.targets:
            c = t.first_crash
            found = f"{c.exception} at {c.found_s:.2f} s ({c.execs:,} execs)" if c else "no crash"
            print(f"  {t.target:32} execs {t.execs:>9,}  edges {t.edges!s:>4}  corpus {t.corpus:>4}  {found}")


if __name__ == "__main__":
    main(sys.argv[1:])
