"""Sums the concolic engine's per-task counters (RESULT ``stats``) for fuzzer_stats, plot_data, status and warnings.

Every committed result's ``stats`` map is added up here: branches, concretisations by kind,
solver queries (sat/unsat/unknown), divergences, false findings, ... . ``fuzzer_stats`` gets
one ``engine_<counter>`` line each, ``plot_data`` three columns. A target whose first
``WARN_AFTER`` results (or all of its results, at the campaign's end) recorded no symbolic branch
at all gets one ``target.no_symbolic_branches`` warning naming where the input most likely left
Python (the ``left_via.<function>`` counter the engine sends, see ``worker/concolic/diagnose.py``). A target whose library failed to
load rewritten (the engine then sees only the harness) gets one ``engine.library_not_instrumented``
warning naming the packages and the exception (the ``not_instrumented.<why>`` counter).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

import structlog

from symfence.protocol.rules import LEFT_VIA, NOT_INSTRUMENTED

log = structlog.get_logger()

# Results of a target, none with a symbolic branch, before it is warned about: the seed's run
# alone (one zero byte) decided before, and rarfile's campaign ended with 6,868 branches.
WARN_AFTER = 5
MAX_KEYS = 512  # distinct counter names kept (kinds are open-ended); the rest add up in "other"
PREFIX = "engine_"
ALWAYS = ("branches", "queries", "sat", "unsat")  # every engine's
# The Python engine's own (it always sends `implicit_branches`): shown once it reported, never for
# a native campaign, whose engines compute none of them (a row of zeros there read as "none").
PYTHON_ALWAYS = ("implicit_branches", "concretisations", "unknown", "divergences", "false_findings")
PLOT_COLUMNS = ("engine_branches", "engine_concretisations", "engine_false_findings")


def _hint(exit_via: str) -> str:
    """What `target.no_symbolic_branches` tells the user, by how the input left the engine's view."""
    if exit_via == "input_unused":
        return ("no run branched on the input: the target returned before using it, or used it only in "
                "ways the engine does not follow (the fuzz stage is not affected)")
    if exit_via.startswith("c_"):
        return (f"the input goes into the C function {exit_via[2:]} before any branch on it: if a Python "
                "module of yours calls it, list that module under [concolic] instrument, or have the "
                "target parse the input in Python first")
    return (f"the engine does not follow {exit_via} on the input (it makes the input plain there), so "
            "no branch after it is negated; the fuzz stage is not affected")


@dataclass
class EngineCounters:
    """Campaign-wide sums of the engine counters, and the no-branch watch per target."""

    totals: Counter[str] = field(default_factory=Counter)
    _silent: dict[str, int] = field(default_factory=dict)  # target -> results with no branch
    _exits: dict[str, Counter[str]] = field(default_factory=dict)
    _warned: set[str] = field(default_factory=set)
    _warned_library: set[str] = field(default_factory=set)
    _warned_length: set[str] = field(default_factory=set)

    def add(self, target: str, stats: Mapping[str, int], work_id: str = "") -> None:
        if stats.get("false_findings", 0) > 0:
            log.warning("finding.not_reproduced", target=target, work_id=work_id[:16],
                        count=stats["false_findings"],
                        detail="crash/hang of the instrumented run did not reproduce on the plain target; not saved")
        for key, value in stats.items():
            if type(value) is not int or value < 0:
                continue  # the codec admits any int; counters are never negative
            if key in self.totals or len(self.totals) < MAX_KEYS:
                self.totals[key] += value
            else:
                self.totals["other"] += value
        self._watch(target, stats)

    def _watch(self, target: str, stats: Mapping[str, int]) -> None:
        if target not in self._warned_library and stats.get("imports_not_instrumented"):
            # (set beside the `not_instrumented.<why>` key, so the common result skips the scan)
            why = next((key[len(NOT_INSTRUMENTED):] for key in stats if key.startswith(NOT_INSTRUMENTED)), None)
            if why is not None:
                self._warned_library.add(target)
                log.warning("engine.library_not_instrumented", target=target, why=why,
                            hint=("the library the harness imports failed to import with the engine's "
                                  "rewrite, so the engine follows the input through the harness only "
                                  "(the fuzz stage is not affected); a bug in symfence: please report it"))
        if stats.get("beyond_max_input_len") and target not in self._warned_length:
            self._warned_length.add(target)
            log.warning("engine.input_limit_reached", target=target,
                        hint=("a branch can be taken only by an input longer than concolic.options."
                              "max_input_len: raise it to let the engine grow inputs that far"))
        if target in self._warned or "branches" not in stats:
            return  # not an engine result (synthetic executor, errors) or already warned
        if stats.get("branches", 0) > 0:
            self._warned.add(target)  # it works: never warn about this target
            return
        self._silent[target] = self._silent.get(target, 0) + 1
        exits = self._exits.setdefault(target, Counter())
        for key, value in stats.items():
            if key.startswith(LEFT_VIA):
                exits[key[len(LEFT_VIA):]] += value
        if self._silent[target] >= WARN_AFTER:
            self._warn_silent(target)

    def finish(self) -> None:
        """The campaign ended: a target whose results (fewer than WARN_AFTER) all had no branch is
        warned about now."""
        for target in sorted(self._silent):
            if target not in self._warned:
                self._warn_silent(target)

    def _warn_silent(self, target: str) -> None:
        self._warned.add(target)
        exits = self._exits.get(target) or Counter()
        exit_via = exits.most_common(1)[0][0] if exits else "unknown"
        log.warning("target.no_symbolic_branches", target=target, results=self._silent[target],
                    left_via=exit_via, hint=_hint(exit_via))

    def items(self) -> list[tuple[str, object]]:
        """``fuzzer_stats`` rows, sorted by name (the main ones even at 0, once the engine reported)."""
        if not self.totals:
            return []
        shown = ALWAYS + PYTHON_ALWAYS if "implicit_branches" in self.totals else ALWAYS
        totals = Counter({key: 0 for key in shown})
        totals.update(self.totals)
        rows: list[tuple[str, object]] = [(PREFIX + key, value) for key, value in sorted(totals.items())
                                          if not key.startswith(LEFT_VIA)]
        return rows + [(PREFIX + key, value) for key, value in sorted(totals.items()) if key.startswith(LEFT_VIA)]

    def plot_values(self) -> list[int]:
        """The values of ``PLOT_COLUMNS`` for one plot_data row."""
        t = self.totals
        return [t["branches"], t["concretisations"], t["false_findings"]]
