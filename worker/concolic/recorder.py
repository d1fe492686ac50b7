"""The recorder of one run: the branch sites, directions and conditions its proxies decide, pins, counters.

A branch site is the caller's code object and instruction offset, hashed to 16 bits (stable
across processes); each direction of a site is a coverage location. In symbolic mode the
recorder keeps each branch's z3 condition and the variables it depends on; ``Pin``s are the
constraints a path needs that are never negated (assumptions, pinned concretisations). Which
recorder is active, and how proxies report to it, is ``symbolic``'s.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import z3

if TYPE_CHECKING:
    from symfence.worker.concolic.symbolic import SymInt

LENGTH_BIT = 1  # dependency bit of the input length; byte j is bit j + 1
_MAX_LOCATIONS = 1 << 20  # coverage locations kept per run (loops saturate buckets anyway)
_MAX_SPLICES = 256  # splices and insertion points noted per run
_MAX_CONSTANTS = 32  # text constants kept per run for insertions


_SITES: dict[tuple[int, int], tuple[int, int, int]] = {}
_CODES: dict[int, object] = {}  # keeps code objects alive so their ids are never reused


def _mix(h: int, direction: int) -> int:
    return (((h * 2 + direction) * 0x9E3779B1) & 0xFFFFFFFF) >> 16


def site_of(frame: Any) -> tuple[int, int, int]:
    """``(site id, location if not taken, location if taken)`` of the frame's current op.

    Stable across processes (module name, qualified name, first line, offset; no ``id``).
    """
    code = frame.f_code
    key = (id(code), frame.f_lasti)
    ids = _SITES.get(key)
    if ids is None:
        module = frame.f_globals.get("__name__", "?")
        text = f"{module}:{code.co_qualname}:{code.co_firstlineno}:{frame.f_lasti}"
        h = zlib.crc32(text.encode())
        ids = ((h ^ (h >> 16)) & 0xFFFF, _mix(h, 0), _mix(h, 1))
        _SITES[key] = ids
        _CODES[id(code)] = code
    return ids


@dataclass(frozen=True)
class Pin:
    """A constraint on the path that is never negated (an assumption or a pinned concretisation)."""

    position: int  # number of branches recorded before it
    constraint: z3.BoolRef
    deps: int
    value: int


class Recorder:
    """Collects one run's branch decisions, coverage locations, (symbolic) conditions and counters."""

    __slots__ = (
        "symbolic", "max_branches", "pin_concretised", "sites", "taken", "conds", "deps",
        "pins", "locations", "capped", "concretisations", "implicit", "ends", "on_length",
        "strings", "states", "splices", "insertions", "constants",
    )

    def __init__(self, *, symbolic: bool, max_branches: int, pin_concretised: bool = False):
        self.symbolic = symbolic
        self.max_branches = max_branches
        self.pin_concretised = pin_concretised
        self.sites: list[int] = []
        self.taken: list[bool] = []
        self.conds: list[z3.BoolRef] = []  # symbolic only: the condition as evaluated
        self.deps: list[int] = []  # symbolic only: variable mask of each condition
        self.pins: list[Pin] = []
        self.locations: list[int] = []
        self.capped = False
        self.concretisations: Counter[str] = Counter()  # kind -> count
        self.implicit = 0  # branches added by models (scans, bounds, end of input)
        self.ends: set[int] = set()  # indices of end-of-input branches (``len > n``)
        # indices of branches on the input length alone (``pos >= len(data)`` in a read loop):
        # negated whatever the bound, as the loop may need a longer input at any iteration
        self.on_length: set[int] = set()
        self.strings: set[int] = set()  # branches whose condition is in z3's string theory (``re``)
        self.states: dict[int, int] = {}  # branch -> hash of what it hands on that its direction hides
        # piece of the input compared with a constant of another length: (start, end,
        # constant) -> number of branches before it (``splice``)
        self.splices: dict[tuple[int, int, bytes], int] = {}
        # where an empty piece of the input was tested (input offset -> branches before it), and
        # the text constants compared with values built from the input: ``insert``
        self.insertions: dict[int, int] = {}
        self.constants: dict[bytes, None] = {}

    @property
    def wants_conditions(self) -> bool:
        """Whether a new branch's condition would be kept (symbolic and under the cap)."""
        return self.symbolic and len(self.sites) < self.max_branches

    def branch(self, frame: Any, taken: bool, proxy: SymInt, end_of_input: int = -1,
               salt: int = 0) -> None:
        cond = None
        if self.wants_conditions:
            cond = proxy.condition()
            if not isinstance(cond, z3.BoolRef):
                # A comparison with no condition: decided without the input, by C code that compared
                # a symbolic value (functools.lru_cache's key lookup in urllib.parse.urlsplit). It is
                # no branch of this input, and the plain run, with no proxies, never sees it.
                return
        site, not_taken_loc, taken_loc = site_of(frame)
        if salt:  # one call site deciding for several things (the patterns of a lexer loop)
            site = _mix(site ^ (salt << 16), 1)
            not_taken_loc, taken_loc = _mix(site, 0), _mix(site, 1)
        if end_of_input >= 0:
            # A different site per input length (bucketed): reaching the end at another length
            # is another path, so a longer input shows as new coverage and is kept.
            n = end_of_input if end_of_input < 8 else 8 + end_of_input.bit_length()
            salt = _mix(site + 0x10000 * (n + 1), 0)
            site, not_taken_loc, taken_loc = salt, _mix(salt, 0), _mix(salt, 1)
            if len(self.sites) < self.max_branches:
                self.ends.add(len(self.sites))
        if len(self.locations) < _MAX_LOCATIONS:
            self.locations.append(taken_loc if taken else not_taken_loc)
        if len(self.sites) >= self.max_branches:
            self.capped = True
            return
        self.sites.append(site)
        self.taken.append(taken)
        if self.symbolic:
            self.conds.append(cond)
            self.deps.append(proxy.deps)
            if proxy.deps == LENGTH_BIT and end_of_input < 0:
                self.on_length.add(len(self.sites) - 1)

    def splice(self, start: int, end: int, replacement: bytes) -> None:
        """Note that input bytes ``start:end`` were compared with a constant of another length
        (``replacement``, encoded as the input holds it): the search tries the input with that
        piece replaced, which no solver query can write (the bytes after it move)."""
        if self.symbolic and len(self.splices) < _MAX_SPLICES:
            self.splices.setdefault((start, end, replacement), len(self.sites))

    def progress(self, frame: Any, score: int) -> None:
        """A coverage location only (no branch, no condition): how many parts of a comparison
        matched, so an input closer to the expected value is new coverage and is kept, as the
        split comparisons of laf-intel make it for AFL++."""
        if len(self.locations) < _MAX_LOCATIONS:
            site = site_of(frame)[0]
            self.locations.append(_mix(site ^ ((min(score, 255) + 1) << 16), 1))

    def insertion(self, offset: int) -> None:
        """An empty piece of the input at ``offset`` was tested (``if content:``): a constant
        compared later may belong there (``constant``)."""
        if self.symbolic and len(self.insertions) < _MAX_SPLICES:
            self.insertions.setdefault(offset, len(self.sites))

    def constant(self, value: bytes) -> None:
        """A text constant compared, unequal, with a value built from the input."""
        if self.symbolic and value and len(self.constants) < _MAX_CONSTANTS:
            self.constants[value] = None

    def assume(self, constraint: z3.BoolRef, deps: int) -> None:
        """Add a constraint the path needs (never negated), e.g. a decoded byte stays ASCII."""
        if self.symbolic and deps:
            self.pins.append(Pin(len(self.sites), constraint, deps, 0))

    def concretised(self, proxy: SymInt | None, kind: str) -> None:
        self.concretisations[kind] += 1
        if (proxy is not None and self.pin_concretised and self.symbolic
                and proxy.expr is not None):
            value = int(proxy.value)
            self.pins.append(Pin(len(self.sites), proxy.expr == value, proxy.deps, value))

