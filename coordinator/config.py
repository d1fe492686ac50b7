"""Campaign configuration: load a TOML file, check every key, fill defaults, fail with one line."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from symfence.coordinator.engines import MODES, Slices, TargetKind, python_modes, target_of
from symfence.protocol.rules import MAX_BATCH

# The executor a config with `targets` but no `executor` gets: both stages (engine + Atheris).
# The synthetic executor is for benchmarks and tests and must be asked for by name.
DEFAULT_PYTHON_EXECUTOR = "hybrid"
# Executors whose targets are Python `module.path:function` specs (imported and checked up front).
# The `campaign.executor` values are the engine registry's modes (engines.py), read from there.
PYTHON_EXECUTORS = python_modes()
EXECUTORS = tuple(MODES)
FAULT_KINDS = (
    "duplicate",
    "stale",
    "missing",
    "malformed_token",
    "non_map",
    "oversized",
    "misrouted",
    "unowned",
    "wrong_version",
    "late",
    "drop_work",
    "buggy_result",  # stands for a bug in symfence (worker/faults.py): reported as one, exit 5
)


class ConfigError(Exception):
    """A config problem, phrased as one line naming the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


# --- schema: section -> key -> (default, checker) -------------------------------------------

Check = Callable[[str, Any], Any]


def _int(minimum: int, maximum: int | None = None) -> Check:
    def check(key: str, v: Any) -> int:
        if type(v) is not int or v < minimum or (maximum is not None and v > maximum):
            rng = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
            raise ConfigError(key, f"must be an integer {rng}, got {v!r}")
        return v

    return check


def _float(minimum: float, maximum: float | None = None) -> Check:
    def check(key: str, v: Any) -> float:
        if type(v) not in (int, float) or v < minimum or (maximum is not None and v > maximum):
            rng = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
            raise ConfigError(key, f"must be a number {rng}, got {v!r}")
        return float(v)

    return check


def _str(choices: tuple[str, ...] | dict[str, Any] | None = None) -> Check:
    def check(key: str, v: Any) -> str:
        if type(v) is not str or (choices and v not in choices):
            want = f"one of {', '.join(choices)}" if choices else "a string"
            raise ConfigError(key, f"must be {want}, got {v!r}")
        return v

    return check


def _bool(key: str, v: Any) -> bool:
    if type(v) is not bool:
        raise ConfigError(key, f"must be true or false, got {v!r}")
    return v


def _str_list(key: str, v: Any) -> list[str]:
    if type(v) is not list or not all(type(x) is str for x in v):
        raise ConfigError(key, f"must be a list of strings, got {v!r}")
    return list(v)


def _share(key: str, v: Any) -> float | str:
    """The fuzz stage's share of worker time: a number in [0, 1] or "auto"."""
    if v == "auto":
        return v
    if type(v) not in (int, float) or not 0 <= v <= 1:
        raise ConfigError(key, f'must be "auto" or a number in [0, 1], got {v!r}')
    return float(v)


def _store(key: str, v: Any) -> str:
    """The campaign store's name: "", `sqlite:PATH` or a PostgreSQL URL."""
    from symfence.coordinator.shared import store_problem

    if type(v) is not str:
        raise ConfigError(key, f"must be a string, got {v!r}")
    problem = store_problem(v)
    if problem:
        raise ConfigError(key, problem)
    return v


def _coordinator_name(key: str, v: Any) -> str:
    from symfence.coordinator.shared.records import coordinator_id

    if v == "":
        return v
    try:
        return coordinator_id(v)
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None


# The most dispatches one rank may hold (dispatch.depth, dispatch.max_depth). Each costs rank 0 an
# in-flight record (~0.3 KB) and, until MPI has sent it, its WORK frame; the worker holds the inputs.
MAX_DEPTH = 256


def _depth(key: str, v: Any) -> int | str:
    """Dispatches in flight per worker rank: a positive integer, or "auto" (coordinator/depth.py)."""
    if v == "auto" or (type(v) is int and 1 <= v <= MAX_DEPTH):
        return v
    raise ConfigError(key, f'must be an integer in [1, {MAX_DEPTH}] or "auto", got {v!r}')


def _max_depth(key: str, v: Any) -> int:
    if type(v) is int and 1 <= v <= MAX_DEPTH:
        return v
    raise ConfigError(key, f"must be an integer in [1, {MAX_DEPTH}], got {v!r}")


def _module_list(key: str, v: Any) -> list[str]:
    names = _str_list(key, v)
    for name in names:
        if not name or not all(part.isidentifier() for part in name.split(".")):
            raise ConfigError(key, f"{name!r} is not a module name")
        if name == "symfence" or name.startswith("symfence.") or name.split(".")[0] == "z3":
            raise ConfigError(key, f"{name!r} is never instrumented")
    return names


def _options(key: str, v: Any) -> dict[str, Any]:
    if type(v) is not dict:
        raise ConfigError(key, "must be a table of scalar values")
    # The engine's own option table (z3-free): unknown keys and wrong types are errors here,
    # before anything is launched, not task errors later.
    from symfence.protocol.options import EngineOptions, OptionError

    try:
        EngineOptions.check(v)
    except OptionError as exc:
        raise ConfigError(f"{key}.{exc.key}", exc.reason) from None
    return dict(v)


def _native_options(key: str, v: Any) -> dict[str, Any]:
    from symfence.protocol.options import NativeOptions

    if type(v) is not dict or not all(type(x) in (str, int, float, bool) for x in v.values()):
        raise ConfigError(key, "must be a table of scalar values")
    options = dict(v)
    try:
        NativeOptions.from_mapping(options)
    except ValueError as exc:
        name, _, why = str(exc).partition(": ")
        raise ConfigError(f"{key}.{name.split('.', 1)[-1]}", why) from None
    return options


SCHEMA: dict[str, dict[str, tuple[Any, Check]]] = {
    "campaign": {
        "name": ("campaign", _str()),
        "executor": (DEFAULT_PYTHON_EXECUTOR, _str(MODES)),  # (the live registry: a new engine's mode too)
        "targets": ([], _str_list),  # synthetic: ["synthetic"]; Python executors: module:function
        # Folders put first on the targets' import path by `symfence run` (every rank) and by the
        # tools that replay a campaign's inputs (replay, status, ...): `import_path`.
        "pythonpath": ([], _str_list),
        "seeds": ("", _str()),  # directory of seed files; "" = the executor's built-in seeds
        # Seeds journaled before the first dispatch; the rest while dispatch runs (seeding.py).
        # 0 = every seed before the first dispatch.
        "seed_first": (4096, _int(0)),
        "output": ("out/campaign", _str()),
        "duration_s": (60.0, _float(0)),  # 0 = until work is exhausted
        "max_results": (0, _int(0)),  # stop after this many committed results, 0 = no limit
        "ranks": (3, _int(2)),  # world size used by `symfence run` when it launches mpiexec
        # The shared campaign store several coordinators join (coordinator/sharedwork.py):
        # "" = none (one coordinator), "sqlite:/path/campaign.db", "postgresql://...".
        "store": ("", _store),
    },
    "store": {  # tuning of the shared campaign store (only with campaign.store)
        "coordinator": ("", _coordinator_name),  # this coordinator's name; "" = <host>-<out dir name>
        "lease_s": (10.0, _float(0.5)),  # a lease's time to live; renewed every third of it
        "lease_batch": (0, _int(0)),  # items leased at a time; 0 = twice the workers' slots (at least 8)
    },
    "dispatch": {
        "depth": (2, _depth),  # or "auto": each rank's depth from its round trip and task time
        # The most "auto" picks per rank; above 8 only while it pays (depth.py): 50 ms round trips
        # with 10 ms tasks need ~7, with 1 ms tasks ~51 (set 64 there). At most MAX_DEPTH.
        "max_depth": (32, _max_depth),
        "deadline_s": (0.0, _float(0)),  # 0 = no per-dispatch deadline
        "max_attempts": (3, _int(1)),
        "drain_timeout_s": (10.0, _float(0)),
        "stop_timeout_s": (10.0, _float(0.1)),
        "hello_timeout_s": (60.0, _float(0.1)),
    },
    "workers": {
        "heartbeat_s": (1.0, _float(0.01)),
        "lost_after_s": (10.0, _float(0.05)),
        # A worker that hears nothing from rank 0 this long (rank 0 beats every heartbeat_s) ends
        # itself: a host cut off from the coordinator leaves no ranks running. 0 = never.
        "orphan_after_s": (60.0, _float(0)),
        # Each worker's own log: "" = OUT/logs/ (a shared or per-host OUT); else a folder local to
        # the worker's host (`~` and $VARS expanded there, e.g. "$TMPDIR"): the path is reported.
        "scratch_dir": ("", _str()),
        "poll_cap_ms": (10.0, _float(0.01, 1000)),  # an idle worker's longest sleep between polls
    },
    "mpi": {
        "poll_cap_ms": (1.0, _float(0.01, 1000)),
        "batch": (256, _int(1)),
        # Results a worker sends in one frame, and WORKs rank 0 sends a worker in one frame (each
        # still fenced by its own token); 1 = one per frame. At most protocol.rules.MAX_BATCH.
        "max_batch": (32, _int(1, MAX_BATCH)),
        # How long a worker may hold a finished result for the next one to share its frame (only
        # while enough of its dispatches are queued that the coordinator need not hear sooner).
        "hold_ms": (2.0, _float(0, 1000)),
    },
    "limits": {
        "max_message_bytes": (16 << 20, _int(1024)),
        "max_candidate_bytes": (1 << 20, _int(16)),
        "max_candidates": (4096, _int(1)),
        # A rank that is not banned with more than this share of its results refused as malformed,
        # incompatible or mismatched (a bug in symfence) makes the campaign exit 5 (coordinator/refusals.py).
        "max_refused_share": (0.01, _float(0, 1)),
    },
    "journal": {
        "batch_ops": (256, _int(1)),  # group commit: flush after this many records ...
        "batch_ms": (50.0, _float(0)),  # ... or when the oldest unflushed one is this old
        "synchronous": ("normal", _str(("normal", "full"))),  # "full": commits survive power loss
    },
    "stats": {
        "interval_s": (1.0, _float(0.05)),
        "window_tokens": (65536, _int(16)),
    },
    "synthetic": {
        "seeds": (1000, _int(1)),
        "task_ms": (1.0, _float(0)),
        "distribution": ("fixed", _str(("fixed", "uniform", "exponential"))),
        "candidates": (0, _int(0)),
        "error_rate": (0.0, _float(0, 1)),
        "first_attempt_ms": (0.0, _float(0)),
        "change_after_s": (0.0, _float(0)),  # > 0: after this long on a worker, tasks take ...
        "task_ms_after": (0.0, _float(0)),  # ... this long instead (to watch dispatch.depth = "auto" adapt)
    },
    "concolic": {
        "options": ({}, _options),
        "instrument": ([], _module_list),  # e.g. ["tomllib._parser"]: rewritten like the target
    },
    "fuzz": {  # the mutation stage (Atheris): executor "fuzz" or "hybrid"
        "slice_s": (10.0, _float(0.5)),  # one fuzz slice = this long on one target
        "share": ("auto", _share),  # fraction of worker time for fuzz slices in a hybrid campaign
        "exec_timeout_s": (1.0, _float(0.01)),  # one execution; longer is a hang
        # Longest input libFuzzer may generate. 0 = libFuzzer's gradual length control, which
        # restarts from the corpus' longest input in every slice (too short for e.g. tar's
        # 512-byte headers); a length here is used from each slice's first execution
        # (-max_len with -len_control=0: -max_len alone still ramps up to it).
        "max_len": (4096, _int(0)),
        "max_candidates": (1000, _int(1)),  # kept inputs returned per slice
        "dictionary": (True, _bool),  # feed the engine's comparison constants to libFuzzer
        "library_dict": (True, _bool),  # the code under test's string constants as libFuzzer tokens
        "dict": ("", _str()),  # a libFuzzer/AFL dictionary file (-dict=FILE) for every target
        "rss_limit_mb": (2048, _int(0)),  # libFuzzer's -rss_limit_mb in the slices (0 = none)
        # executor "native": havoc slices through the afl-cc build's forkserver fill the slots the
        # engine leaves idle and take `share` (oracle forkserver or showmap; docs/native-slices.md)
        "native_slices": (False, _bool),  # opt-in: see docs/native-slices.md, "What remains"
    },
    "coverage": {  # the real-trace yardstick for every candidate of either stage
        "include": ([], _str_list),  # module names or paths; [] = the target's package + its imports
    },
    "native": {
        "options": ({}, _native_options),  # engine, oracle, afl_target, ... (worker/native/base.py)
    },
    "afl": {  # AFL++ side by side (coordinator/aflsync.py); off while sync_dir is ""
        "sync_dir": ("", _str()),
        "instance": ("symfence", _str()),
        "import_interval_s": (2.0, _float(0.05)),
        "export": (True, _bool),
        "target": ("", _str()),  # the campaign target the sync dir fuzzes ("" = the first)
        "launch": (0, _int(0)),  # afl-fuzz -S instances the coordinator starts and stops
        "launch_binary": ("", _str()),  # their AFL build ("" = native.options.afl_target)
        "launch_args": ([], _str_list),
    },
    "triage": {  # crash identity and minimization (coordinator/triage.py, docs/triage.md)
        "minimize": (True, _bool),  # every new unique crash and hang is minimized by a worker
        "minimize_budget_s": (60.0, _float(1)),  # one minimization's wall time
    },
    "peers": {  # per-rank fairness, bans and caps (coordinator/peers.py)
        "frames_per_turn": (32, _int(1)),
        "backlog_frames": (4096, _int(16)),
        "ban_garbage": (200.0, _float(0)),  # 0 = never ban
        "garbage_leak_per_s": (20.0, _float(0)),
        "expiry_strikes": (3, _int(0)),  # 0 = never suspend
        "suspend_s": (10.0, _float(0)),
        "max_execs_per_s": (100000.0, _float(1)),
        "new_edges_per_exec": (1024, _int(1)),
        "max_new_edges_per_result": (32768, _int(1)),
        "new_edges_per_s": (512.0, _float(0)),
        "new_edges_burst": (32768, _int(1)),
        "max_pending_claims": (16, _int(1)),
    },
    "faults": {
        "enabled": (False, _bool),
        "seed": (1, _int(0)),
        **{kind: (0.0, _float(0, 1)) for kind in FAULT_KINDS},
    },
}


@dataclass(frozen=True)
class Config:
    """A checked config: `section.key` lookups with every default filled in."""

    values: dict[str, dict[str, Any]]
    path: Path | None = None
    base_dir: Path = field(default_factory=Path.cwd)

    def __getitem__(self, dotted: str) -> Any:
        section, key = dotted.split(".", 1)
        return self.values[section][key]

    def section(self, name: str) -> dict[str, Any]:
        return dict(self.values[name])

    def output_dir(self, override: str | None = None) -> Path:
        return Path(override) if override else Path(self["campaign.output"])


def parse(raw: dict[str, Any], path: Path | None = None) -> Config:
    values: dict[str, dict[str, Any]] = {}
    for section, table in raw.items():
        if section not in SCHEMA:
            raise ConfigError(section, f"unknown section (known: {', '.join(SCHEMA)})")
        if type(table) is not dict:
            raise ConfigError(section, "must be a table")
        for key in table:
            if key not in SCHEMA[section]:
                raise ConfigError(f"{section}.{key}", "unknown key")
    for section, keys in SCHEMA.items():
        table = raw.get(section, {})
        values[section] = {
            key: check(f"{section}.{key}", table[key]) if key in table else default
            for key, (default, check) in keys.items()
        }
    campaign = values["campaign"]
    if MODES[campaign["executor"]].corpus.target is TargetKind.SYNTHETIC and not campaign["targets"]:
        campaign["targets"] = ["synthetic"]  # no target: the benchmark's (or a toy engine's) name
    cfg = Config(values, path, path.parent if path else Path.cwd())
    if MODES[cfg["campaign.executor"]].corpus.target is TargetKind.PYTHON:
        if not cfg["campaign.targets"]:
            raise ConfigError("campaign.targets", f"the {cfg['campaign.executor']} executor needs"
                              ' module:function targets (the synthetic benchmark: executor = "synthetic")')
        for spec in cfg["campaign.targets"]:
            problem = target_spec_problem(spec)
            if problem:
                raise ConfigError("campaign.targets", f"{spec!r}: {problem}")
    if len(set(cfg["campaign.targets"])) != len(cfg["campaign.targets"]):
        raise ConfigError("campaign.targets", "names a target twice")
    deadline, slice_s = cfg["dispatch.deadline_s"], cfg["fuzz.slice_s"]
    slices = MODES[cfg["campaign.executor"]].slices is Slices.ALWAYS or native_slices_on(cfg)
    if slices and deadline and deadline < 2 * slice_s + 5:
        raise ConfigError("dispatch.deadline_s", f"must be 0 or >= 2 * fuzz.slice_s + 5 = {2 * slice_s + 5:g}"
                                                 f" (a fuzz slice runs {slice_s:g} s), got {deadline:g}")
    orphan, beat = cfg["workers.orphan_after_s"], cfg["workers.heartbeat_s"]
    if orphan and orphan < 3 * beat:
        raise ConfigError("workers.orphan_after_s", f"must be 0 or >= 3 * workers.heartbeat_s = {3 * beat:g}"
                                                    f" (rank 0 beats every heartbeat_s), got {orphan:g}")
    if cfg["afl.sync_dir"] and cfg["afl.target"] and cfg["afl.target"] not in cfg["campaign.targets"]:
        raise ConfigError("afl.target", "must be one of campaign.targets")
    if not cfg["campaign.targets"]:
        raise ConfigError("campaign.targets", "must name at least one target")
    return cfg


def native_slices_on(cfg: Config) -> bool:
    """Whether a native campaign runs mutation slices: ``fuzz.native_slices`` and an oracle that
    runs the afl-cc build (forkserver or showmap; the slices use its forkserver)."""
    return (MODES[cfg["campaign.executor"]].slices is Slices.OPTION and bool(cfg["fuzz.native_slices"])
            and cfg["native.options"].get("oracle", "engine") != "engine")


def target_spec_problem(spec: str) -> str | None:
    """Why `spec` is not a `module.path:function` target spec, or None."""
    module, sep, function = spec.partition(":")
    if not sep:
        return "a target must look like module.path:function (no ':' in it)"
    if not module or not all(part.isidentifier() for part in module.split(".")):
        return f"{module!r} is not a module path"
    if not function.isidentifier():
        return f"{function!r} is not a function name"
    return None


def executor_options(cfg: Config) -> dict[str, Any]:
    """The per-work executor options (part of every work_id; --resume refuses to change them)."""
    if MODES[cfg["campaign.executor"]].corpus.target is TargetKind.SYNTHETIC:
        s = cfg.section("synthetic")
        keys: tuple[str, ...] = ("task_ms", "distribution", "candidates", "error_rate", "first_attempt_ms")
        keys += ("change_after_s", "task_ms_after") if s["change_after_s"] else ()  # work_ids as before
        return {k: s[k] for k in keys}
    if target_of(cfg["campaign.executor"]) is TargetKind.NATIVE:
        return dict(cfg["native.options"])
    options = {**cfg["concolic.options"], "cov_include": ",".join(cfg["coverage.include"])}
    if cfg["concolic.instrument"]:  # modules rewritten besides the target's package (a string on the wire)
        options["instrument"] = ",".join(cfg["concolic.instrument"])
    return options


def exec_timeout_s(cfg: Config) -> float:
    """One execution's time limit (longer is a hang) as the campaign's findings were confirmed
    with: the corpus executor's option (every Python executor re-runs findings on the concolic
    stage, so it is concolic.options.exec_timeout_s there; native.options.exec_timeout_s).
    The one value `symfence replay`, `cmin`, `coverage` and the pytest plugin apply per input."""
    if target_of(cfg["campaign.executor"]) is TargetKind.NATIVE:
        from symfence.protocol.options import NativeOptions

        return NativeOptions.from_mapping(cfg["native.options"]).exec_timeout_s
    from symfence.protocol.options import EngineOptions

    return EngineOptions.from_mapping(cfg["concolic.options"]).exec_timeout_s


# Where each executor_options key comes from in the config (for one-line errors).
OPTION_KEYS = {"cov_include": "coverage.include", "instrument": "concolic.instrument"}


def import_path(cfg: Config) -> list[str]:
    """`campaign.pythonpath` as absolute folders (relative ones from the current directory)."""
    return [str(Path(p).absolute()) for p in cfg["campaign.pythonpath"]]


def load(path: str | Path) -> Config:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError("config", f"cannot read {p}: {exc.strerror}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("config", f"{p} is not valid TOML: {exc}") from None
    return parse(raw, p)
