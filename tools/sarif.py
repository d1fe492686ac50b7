"""SARIF 2.1.0 for `symfence ci`: one result per new crash, its identity as the rule.

Each result: ``ruleId`` the crash identity (docs/triage.md), the message (exception line and how
to reproduce), ``locations`` the top frames in the repository's code (file relative to the root,
line; innermost first), ``relatedLocations`` the reproducer file, and a ``partialFingerprints``
entry of the identity so code scanning follows one bug across runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import symfence

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
TOP_FRAMES = 3


@dataclass(frozen=True)
class SourceFrame:
    file: str  # relative to the repository root, POSIX separators
    line: int
    function: str


def repo_frames(detail: str, root: Path, limit: int = TOP_FRAMES) -> tuple[SourceFrame, ...]:
    """The innermost ``limit`` frames of the traceback's last block that lie in ``root``."""
    lines = detail.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    block = lines[starts[-1]:] if starts else lines
    root = root.resolve()
    frames: list[SourceFrame] = []
    for line in block:
        m = _FRAME.match(line)
        if not m:
            continue
        try:
            rel = Path(m["file"]).resolve().relative_to(root)
        except ValueError:
            continue
        frames.append(SourceFrame(rel.as_posix(), int(m["line"]), m["func"]))
    return tuple(reversed(frames))[:limit]


def last_line(detail: str) -> str:
    """The exception line of a traceback (its last non-empty line)."""
    rest = [line for line in detail.strip().splitlines() if line.strip()]
    return rest[-1].strip() if rest else "crash"


def _location(frame: SourceFrame) -> dict[str, Any]:
    return {"physicalLocation": {"artifactLocation": {"uri": frame.file, "uriBaseId": "%SRCROOT%"},
                                 "region": {"startLine": frame.line}},
            "message": {"text": f"in {frame.function}"}}


def _artifact(path: Path, root: Path) -> tuple[str, dict[str, str]]:
    """(the path as the log shows it, its SARIF artifactLocation): relative to the repository
    root when inside it, else an absolute file URI (``--regressions`` may point anywhere)."""
    full = path.resolve()
    if full.is_relative_to(root.resolve()):
        rel = full.relative_to(root.resolve()).as_posix()
        return rel, {"uri": rel, "uriBaseId": "%SRCROOT%"}
    return str(full), {"uri": full.as_uri()}


def document(crashes: Iterable[Any], root: Path) -> dict[str, Any]:
    """A SARIF log of ``crashes`` (``tools.ci.CrashReport``: identity, target, detail, frames,
    reproducer, command)."""
    crashes = list(crashes)
    rules: dict[str, dict[str, Any]] = {}
    results = []
    for c in crashes:
        rules.setdefault(c.identity, {
            "id": c.identity,
            "name": "FuzzCrash",
            "shortDescription": {"text": f"crash {c.identity}"[:1000]},
            "fullDescription": {"text": f"A crash found by fuzzing {c.target.spec.target},"
                                        f" identity {c.identity}"},
            "defaultConfiguration": {"level": "error"},
            "helpUri": "https://github.com/symfence/symfence/blob/main/docs/ci.md",
        })
        repro, artifact = _artifact(c.reproducer, root) if c.reproducer else ("", {})
        text = f"{c.target.spec.target}: {last_line(c.detail)} (identity {c.identity})"
        if repro:
            text += f"; reproducer {repro}; reproduce: {c.command}"
        fingerprint = hashlib.sha1(c.identity.encode()).hexdigest()
        result: dict[str, Any] = {
            "ruleId": c.identity,
            "ruleIndex": list(rules).index(c.identity),
            "level": "error",
            "kind": "fail",
            "message": {"text": text},
            "locations": [_location(f) for f in c.frames],
            "partialFingerprints": {"symfenceCrashIdentity/v1": fingerprint},
            "properties": {"target": c.target.spec.target, "reproduce": c.command},
        }
        if repro:
            result["relatedLocations"] = [{"id": 0, "physicalLocation": {
                "artifactLocation": artifact},
                "message": {"text": "reproducer"}}]
        results.append(result)
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "symfence", "version": symfence.__version__,
                                "informationUri": "https://github.com/symfence/symfence",
                                "rules": list(rules.values())}},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root.resolve().as_uri() + "/"}},
            "results": results,
        }],
    }


def write(path: Path, crashes: Iterable[Any], root: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document(crashes, root), indent=1) + "\n")
