"""The embedded default campaign finds every planted bug, and each saved crash really crashes."""

from __future__ import annotations

import importlib
import tomllib

import pytest

from tests.mpi_helpers import ROOT, run_campaign

pytestmark = pytest.mark.mpi

BUGS = {
    "examples.magic_header:target": "MagicHeaderBug",
    "examples.tlv:target": "TlvNestingBug",
    "examples.checksum:target": "ChecksumBug",
}


def test_demo_campaign_finds_every_planted_bug(tmp_path):
    cfg = tomllib.loads((ROOT / "configs" / "demo.toml").read_text())
    cfg["campaign"]["duration_s"] = 45  # shortened budget; the demo normally ends in seconds
    run = run_campaign(tmp_path, cfg, ranks=3, timeout_s=120)
    assert run.code == 0, run.explain()
    assert sorted(cfg["campaign"]["targets"]) == sorted(BUGS)
    s = run.stats()
    assert int(s["saved_crashes"]) == len(BUGS)
    assert int(s["quarantined_results"]) == 0
    assert "VIOLATED" not in run.stdout and f"crashing inputs: {run.out / 'crashes'}" in run.stdout

    crashes = sorted((run.out / "crashes").iterdir())
    found = {}
    for path in crashes:
        target = path.name.split("target:")[1]
        module, _, func = target.rpartition(".")
        fn = getattr(importlib.import_module(module), func)
        with pytest.raises(Exception) as exc:  # replay the saved input on the plain target
            fn(path.read_bytes())
        found[f"{module}:{func}"] = type(exc.value).__name__
    assert found == BUGS
