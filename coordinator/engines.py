"""The engine registry: one frozen spec per engine, and which engines each `campaign.executor` runs.

An engine is what a WORK's `executor` field names: the worker runs the module
`worker/executors/<name>.py` (worker/executors/__init__.py), the coordinator reads its spec here.
The spec says everything the coordinator's parts differ on: the kind of target it runs (Python
`module:function` targets, native programs, none), its role (it runs corpus entries, or transient
mutation slices over the corpus), its option class and config section, whether its findings can
be minimized, and the scheduling tier of the corpus entries it finds. Config, the stage plan
(hybrid.py), the scheduler, triage and the tools read it; none of them compares engine names.

A campaign selects engines by `campaign.executor`, a **mode** (`MODES`): the engine that runs the
corpus (and re-runs claimed findings), the mutation engine beside it, and when that one runs.
A new engine is a worker module plus one `EngineSpec` (and a `Mode` if a campaign may select it
by a name of its own): `register`.

A stage (hybrid.py's figures per stage, a corpus entry's origin) is named by its engine: the
stage *is* the spec (`Stage.FUZZ is ENGINES["fuzz"]`), hashed by identity on the hot path.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from symfence.protocol.options import EngineOptions, FuzzOptions, NativeFuzzOptions, NativeOptions


class TargetKind(str, enum.Enum):
    PYTHON = "python"  # `module:function` targets, imported by the worker (their files: hosts.py)
    NATIVE = "native"  # C programs the campaign builds (worker/native/)
    SYNTHETIC = "synthetic"  # no target: the benchmarks' no-op tasks


class Role(str, enum.Enum):
    CORPUS = "corpus"  # runs corpus entries (journal work items) and re-runs claimed findings
    MUTATION = "mutation"  # runs transient slices that mutate the corpus (not journal work items)


@dataclass(frozen=True, eq=False)  # one object per engine: compared and hashed by identity
class EngineSpec:
    name: str  # the executor on the wire and the worker's module, the stage's and origin's name
    target: TargetKind
    role: Role
    options: type | None  # the protocol.options class its options are read with (None: plain map)
    section: str  # the config section its options come from
    minimize: bool  # whether a finding it confirms can be minimized (triage.py)
    tier: int  # where the corpus entries it finds queue (scheduler.py: seeds 0, lower first)
    label: str = ""  # its short name in the live view ("" = name)

    @property
    def value(self) -> str:
        """The stage's name (fuzzer_stats keys, a corpus entry's origin): the engine's."""
        return self.name


class Slices(str, enum.Enum):
    """When a mode's mutation engine runs."""

    NEVER = "never"
    ALWAYS = "always"
    OPTION = "option"  # with `fuzz.native_slices` and an oracle that runs the afl-cc build


@dataclass(frozen=True, eq=False)
class Mode:
    name: str  # the `campaign.executor` value
    corpus: EngineSpec  # runs corpus entries and confirms findings
    mutation: EngineSpec | None  # the mutation stage beside it
    slices: Slices = Slices.NEVER
    engine_runs: bool = True  # False: the corpus engine only re-runs findings (mode "fuzz")


ENGINES: dict[str, EngineSpec] = {}
MODES: dict[str, Mode] = {}
TIERS: dict[str, int] = {}  # engine name -> its tier (the scheduler reads it per item it queues)


def register(spec: EngineSpec, *modes: Mode) -> EngineSpec:
    """Add an engine (and the modes that select it). Its name must be new."""
    if spec.name in ENGINES or any(m.name in MODES for m in modes):
        raise ValueError(f"engine or mode {spec.name!r} is registered already")
    ENGINES[spec.name] = spec
    TIERS[spec.name] = spec.tier
    for m in modes:
        MODES[m.name] = m
    return spec


def unregister(name: str) -> None:
    """Remove an engine and every mode that uses it (for tests that add a toy engine)."""
    spec = ENGINES.pop(name)
    del TIERS[name]
    for mode in [m for m in MODES.values() if spec in (m.corpus, m.mutation)]:
        del MODES[mode.name]


_PY, _NAT = TargetKind.PYTHON, TargetKind.NATIVE
CONCOLIC = register(EngineSpec("concolic", _PY, Role.CORPUS, EngineOptions, "concolic.options",
                               minimize=True, tier=2, label="engine"))
FUZZ = register(EngineSpec("fuzz", _PY, Role.MUTATION, FuzzOptions, "fuzz", minimize=False, tier=1))
SYNTHETIC = register(EngineSpec("synthetic", TargetKind.SYNTHETIC, Role.CORPUS, None, "synthetic",
                                minimize=False, tier=2))
NATIVE = register(EngineSpec("native", _NAT, Role.CORPUS, NativeOptions, "native.options", minimize=True, tier=2))
# Native havoc slices' finds queue last: ahead of the engine's own deeper children they stalled
# its generational search (scheduler.py).
NATIVE_FUZZ = register(EngineSpec("native_fuzz", _NAT, Role.MUTATION, NativeFuzzOptions, "fuzz",
                                  minimize=False, tier=3, label="fuzz"))
for _mode in (Mode("synthetic", SYNTHETIC, None),  # (this order is the config's list of choices)
              Mode("hybrid", CONCOLIC, FUZZ, Slices.ALWAYS),
              Mode("concolic", CONCOLIC, FUZZ, Slices.NEVER),
              Mode("fuzz", CONCOLIC, FUZZ, Slices.ALWAYS, engine_runs=False),
              Mode("native", NATIVE, NATIVE_FUZZ, Slices.OPTION)):
    MODES[_mode.name] = _mode


class Stage:
    """Today's engines as stages, by name (a stage is its engine's spec)."""

    CONCOLIC = CONCOLIC
    FUZZ = FUZZ
    SYNTHETIC = SYNTHETIC
    NATIVE = NATIVE
    NATIVE_FUZZ = NATIVE_FUZZ


def target_of(mode: str) -> TargetKind:
    """The kind of target a `campaign.executor` runs (that of its corpus engine)."""
    return MODES[mode].corpus.target


def python_modes() -> tuple[str, ...]:
    """The modes whose targets are Python `module:function` targets."""
    return tuple(name for name, m in MODES.items() if m.corpus.target is TargetKind.PYTHON)


