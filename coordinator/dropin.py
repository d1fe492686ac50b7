"""`symfence run fuzz_x.py [CORPUS_DIR...] [-flag=value...]`: an Atheris harness run as a campaign.

An OSS-Fuzz user runs ``python fuzz_x.py corpus/ -max_total_time=600``; ``symfence run fuzz_x.py
corpus/ -max_total_time=600`` runs a default campaign (hybrid, ``campaign.ranks`` ranks) on
``fuzz_x:TestOneInput`` instead (on the function the harness hands to ``atheris.Setup``, if it
names another: ``protocol/entrypoint.py``). The libFuzzer flags it takes are translated into config keys
(``LIBFUZZER_FLAGS``, the one table of them); any other is refused by name, one line, exit 2.
The corpus folders' files (recursively, as libFuzzer reads them) are the seeds: they are linked
into ``OUT/seeds`` (the campaign reads one folder). The generated config is written to
``OUT/harness.toml`` and run as any config is; the harness's folder goes first on
``PYTHONPATH``, as ``python fuzz_x.py`` puts it first on ``sys.path``. Outputs go to
``--out`` (default ``out/<harness name>``). A harness whose file name is no module name
(``fuzz-parser.py``) is imported through a link named as one (``module_name``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable

from symfence.coordinator.cli import add_run_options
from symfence.protocol.entrypoint import CONVENTION, entry_point

EXIT_USAGE = 2


def _seconds(v: str) -> float:
    x = float(v)
    if x < 0:
        raise ValueError
    return x


def _positive(v: str) -> float:
    x = float(v)
    if not x > 0:
        raise ValueError
    return x


def _count(v: str) -> int:
    x = int(v)
    if x < 1:
        raise ValueError
    return x


def _mb(v: str) -> int:
    x = int(v)
    if x < 0:
        raise ValueError
    return x


def _mask(v: str) -> int:
    x = int(v)
    if not 0 <= x <= 3:
        raise ValueError(v)
    return x


# flag -> (parse, [(section, key)] it sets). libFuzzer's -timeout is whole seconds per input;
# symfence takes fractions too. -rss_limit_mb bounds both stages (the engine's RLIMIT_AS too).
LIBFUZZER_FLAGS: dict[str, tuple[Callable[[str], Any], tuple[tuple[str, str], ...]]] = {
    "max_total_time": (_seconds, (("campaign", "duration_s"),)),
    "timeout": (_positive, (("concolic.options", "exec_timeout_s"), ("fuzz", "exec_timeout_s"))),
    "rss_limit_mb": (_mb, (("concolic.options", "memory_limit_mb"), ("fuzz", "rss_limit_mb"))),
    "dict": (str, (("fuzz", "dict"),)),
    "max_len": (_mb, (("fuzz", "max_len"),)),
    # libFuzzer runs -jobs=N jobs, -workers=M at a time (M: min(N, half the cores) by default);
    # symfence runs M worker ranks (`worker_ranks`), unless --ranks says otherwise.
    "jobs": (_count, ()),
    "workers": (_count, ()),
    # What libFuzzer prints, taken and left as symfence has it: the fuzz stage always discards
    # the target's own output (-close_fd_mask=3, worker/fuzz/live_child.py), and the campaign
    # always ends with its summary and fuzzer_stats.
    "close_fd_mask": (_mask, ()),
    "print_final_stats": (_mask, ()),
}
# What libFuzzer does without flags, where symfence's own default differs: gradual length
# control (short inputs first: executions several times faster on a text parser than the
# fixed 4096-byte inputs of fuzz.max_len's default). And -max_total_time ends the run near that
# time: at the budget's end the drain waits at most 2 s for in-flight tasks (a claimed crash is
# re-run in that time; an engine task still running is cancelled), not the config default's 10 s.
LIBFUZZER_DEFAULTS: dict[tuple[str, str], Any] = {("fuzz", "max_len"): 0, ("dispatch", "drain_timeout_s"): 2.0}


def worker_ranks(flags: dict[str, str], cores: int) -> int | None:
    """The worker ranks libFuzzer's -workers/-jobs ask for (flags already checked), or None."""
    if "workers" in flags:
        return int(flags["workers"])
    if "jobs" in flags:
        return max(1, min(int(flags["jobs"]), cores // 2))
    return None


class UsageError(Exception):
    """A bad command line, as one line."""


def is_harness_run(argv: list[str]) -> bool:
    """Whether ``argv`` is ``run SOMETHING.py ...`` (a harness, not a TOML config)."""
    return len(argv) >= 2 and argv[0] == "run" and argv[1].endswith(".py")


def parse(argv: list[str]) -> tuple[argparse.Namespace, dict[str, dict[str, Any]], list[Path]]:
    """(symfence options, config tables, corpus folders) of ``run fuzz_x.py ...``."""
    flags: dict[str, str] = {}
    rest: list[str] = []
    for arg in argv[2:]:
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            name, eq, value = arg[1:].partition("=")
            if name not in LIBFUZZER_FLAGS:
                known = ", ".join(f"-{f}" for f in LIBFUZZER_FLAGS)
                raise UsageError(f"-{name}: a libFuzzer flag symfence does not take (it takes {known})")
            if not eq:
                raise UsageError(f"-{name}: needs a value (-{name}=...)")
            flags[name] = value
        else:
            rest.append(arg)
    p = argparse.ArgumentParser(prog="symfence run HARNESS.py", add_help=False)
    p.add_argument("corpus", nargs="*")
    p.add_argument("-n", "--ranks", type=int)
    add_run_options(p)  # the same options as `symfence run CONFIG` (one list: a new one reaches both)
    try:
        args, unknown = p.parse_known_args(rest)
    except SystemExit:
        raise UsageError("bad arguments (see symfence run --help)") from None
    if unknown:
        raise UsageError(f"{unknown[0]}: not an option of symfence run for a harness")
    harness = Path(argv[1])
    if not harness.is_file():
        raise UsageError(f"{harness}: no such harness file")
    try:
        source = harness.read_bytes()
    except OSError as exc:
        raise UsageError(f"{harness}: cannot be read ({exc.strerror})") from None
    # The function `atheris.Setup` is handed, else TestOneInput (the import check refuses a
    # module without it, by name).
    entry = entry_point(source) or CONVENTION
    tables: dict[str, dict[str, Any]] = {"campaign": {"name": harness.stem,
                                                      "targets": [f"{module_name(harness)}:{entry}"]}}
    for (section, key), value in LIBFUZZER_DEFAULTS.items():
        tables.setdefault(section, {})[key] = value
    for name, value in flags.items():
        convert, keys = LIBFUZZER_FLAGS[name]
        try:
            parsed = convert(value)
        except ValueError:
            raise UsageError(f"-{name}={value}: not a valid value") from None
        if name == "dict":
            parsed = str(Path(parsed).resolve())
        for section, key in keys:
            tables.setdefault(section, {})[key] = parsed
    workers = worker_ranks(flags, os.cpu_count() or 1)
    if args.ranks:  # --ranks wins, in the launch and in the config a --resume runs again
        tables["campaign"]["ranks"] = args.ranks
    elif workers:
        tables["campaign"]["ranks"] = workers + 1  # and rank 0, the coordinator
    corpora = [Path(c) for c in args.corpus]
    for c in corpora:
        if not c.is_dir():
            raise UsageError(f"{c}: not a corpus folder")
    args.harness = harness
    return args, tables, corpora


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(tables: dict[str, dict[str, Any]]) -> str:
    lines = ["# written by `symfence run HARNESS.py`: the libFuzzer flags as config keys"]
    for section, keys in tables.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def collect_seeds(corpora: list[Path], into: Path) -> int:
    """Link (or copy) every file under the corpus folders into ``into``, named by content."""
    into.mkdir(parents=True, exist_ok=True)
    count = 0
    for folder in corpora:
        for path in sorted(folder.rglob("*")):
            if not path.is_file():
                continue
            name = hashlib.sha1(path.read_bytes()).hexdigest()
            dest = into / name
            if dest.exists():
                continue
            try:
                os.link(path, dest)
            except OSError:
                shutil.copyfile(path, dest)
            count += 1
    return count


def module_name(harness: Path) -> str:
    """The module the campaign imports the harness as: its file's name, or for a name Python
    cannot import (``fuzz-parser.py``, ``2fuzz.py``) that name made one (``fuzz_parser``), a link
    to the file in ``OUT/harness/`` (``prepare``)."""
    stem = harness.stem
    if stem.isidentifier():
        return stem
    name = re.sub(r"\W", "_", stem)
    return name if name.isidentifier() else f"_{name}"


def prepare(argv: list[str]) -> tuple[argparse.Namespace, Path]:
    """Write the campaign's config and seeds; returns the options and the config's path."""
    args, tables, corpora = parse(argv)
    out = Path(args.out or f"out/{args.harness.stem}")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} is a file")
    out.mkdir(parents=True, exist_ok=True)
    if corpora and collect_seeds(corpora, out / "seeds"):
        tables["campaign"]["seeds"] = str((out / "seeds").resolve())
    folders = [str(args.harness.resolve().parent)]  # as `python fuzz_x.py` puts it on sys.path
    if (name := module_name(args.harness)) != args.harness.stem:
        links = out / "harness"
        links.mkdir(exist_ok=True)
        link = links / f"{name}.py"
        link.unlink(missing_ok=True)
        link.symlink_to(args.harness.resolve())
        folders.insert(0, str(links.resolve()))  # before the harness's folder, which it imports from
    tables["campaign"]["pythonpath"] = folders  # the launch and the tools (replay, status) read it
    config = out / "harness.toml"
    config.write_text(render(tables))
    args.config, args.out = str(config), str(out)
    return args, config
