"""The embedded default campaign (`make demo`) finds a real bug in a real parser, and it really crashes."""

from __future__ import annotations

import importlib
import tomllib

import pytest

from tests.mpi_helpers import ROOT, run_campaign, stop_when_crash

pytestmark = [pytest.mark.mpi, pytest.mark.heavy]

# Unexpected exceptions of the stdlib parsers behind the demo's harnesses (none is an error the
# module documents, so each escapes the harness): wave._Chunk.seek's bare RuntimeError, and
# zipfile's ValueError / UnicodeDecodeError on a damaged central directory.
REAL_BUGS = {
    "examples.parsers.wave_header:target": {"RuntimeError"},
    # EOFError (a stored member cut short: zipfile._read2) and IndexError (an empty member name:
    # ZipInfo.is_dir), found since the fuzz process reads zipfile's constants and instruments it in
    # place; neither is among the harness's documented errors
    "examples.parsers.zip_archive:target": {"ValueError", "UnicodeDecodeError", "EOFError", "IndexError"},
}


def test_demo_is_the_hybrid_executor_on_real_parsers():
    cfg = tomllib.loads((ROOT / "configs" / "demo.toml").read_text())
    assert cfg["campaign"]["executor"] == "hybrid"
    assert sorted(cfg["campaign"]["targets"]) == sorted(REAL_BUGS)
    assert cfg["campaign"]["duration_s"] <= 45  # with start-up and stop: within a minute


def test_demo_campaign_finds_a_real_bug(tmp_path):
    """configs/demo.toml as `make demo` runs it, stopped by Ctrl-C (SIGINT) once the first crash
    file of an expected bug exists: it costs seconds, not the whole budget."""
    cfg = tomllib.loads((ROOT / "configs" / "demo.toml").read_text())
    out = tmp_path / "out"
    bugs = sorted({f"sig:{name}" for names in REAL_BUGS.values() for name in names})
    run = run_campaign(tmp_path, cfg, ranks=3, out=out, timeout_s=150, on_start=stop_when_crash(out, *bugs))
    assert run.code == 0, run.explain()
    crash = next(e for e in run.events() if e["event"] == "finding.crash")
    assert crash["found_s"] <= cfg["campaign"]["duration_s"]  # found within the demo's own budget
    s = run.stats()
    assert int(s["fuzz_execs"]) > 0 and int(s["concolic_execs"]) > 0, s  # both stages ran
    assert int(s["saved_crashes"]) >= 1, run.explain()
    assert int(s["quarantined_results"]) == 0
    assert "VIOLATED" not in run.stdout and f"crashing inputs: {run.out / 'crashes'}" in run.stdout

    found = set()
    for path in sorted((run.out / "crashes").iterdir()):
        target = path.name.split("target:")[1]
        module, _, func = target.rpartition(".")
        fn = getattr(importlib.import_module(module), func)
        with pytest.raises(Exception) as exc:  # replay the saved input on the plain harness
            fn(path.read_bytes())
        name = type(exc.value).__name__
        assert name in REAL_BUGS[f"{module}:{func}"], (path.name, exc.value)
        assert f",sig:{name}-" in path.name or f",sig:{name}," in path.name, path.name  # its identity
        found.add(f"{module}:{func}")
    assert found, "no crash replayed"
