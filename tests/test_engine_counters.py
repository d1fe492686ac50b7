"""The engine counters' fuzzer_stats rows (coordinator/engine_report.py), without MPI."""

from __future__ import annotations

from symfence.coordinator.engine_report import EngineCounters


def test_a_native_campaign_shows_only_the_counters_its_engine_computes() -> None:
    """TritonDSE and SymCC compute no implicit branches, concretisations, divergences or false
    findings: those rows read 0 in every native campaign, which said "none" where nothing was
    counted (a C library's bytes read through lookup tables are concretised, uncounted)."""
    native = EngineCounters()
    native.add("build/yaml", {"branches": 36, "queries": 30, "sat": 20, "unsat": 10, "solver_timeout": 0,
                              "emulation_cut": 1})
    rows = dict(native.items())
    assert rows["engine_branches"] == 36 and rows["engine_emulation_cut"] == 1
    assert not {"engine_false_findings", "engine_divergences", "engine_concretisations",
                "engine_implicit_branches", "engine_unknown"} & set(rows)

    python = EngineCounters()
    python.add("pkg:target", {"branches": 3, "implicit_branches": 0, "concretisations": 0})
    rows = dict(python.items())
    assert rows["engine_false_findings"] == 0 and rows["engine_divergences"] == 0 and rows["engine_sat"] == 0
    assert EngineCounters().items() == []  # no engine result yet: no rows


def test_no_branch_warning_waits_for_several_results_or_the_end() -> None:
    """One branchless result (the seed's run of one zero byte) no longer decides: rarfile was
    warned about and ended with 6,868 branches. A target warned at the end names how the input
    left: a C function, an operation the engine does not follow, or no use at all."""
    import structlog.testing

    from symfence.coordinator.engine_report import WARN_AFTER

    silent = {"branches": 0, "left_via.c_zlib.decompress": 1}
    with structlog.testing.capture_logs() as logs:
        counters = EngineCounters()
        for _ in range(WARN_AFTER - 1):
            counters.add("late:target", silent)
        counters.add("late:target", {"branches": 12})  # it branches after all: never warned
        for _ in range(WARN_AFTER - 1):
            counters.add("c:target", silent)
        counters.add("op:target", {"branches": 0, "left_via.bytes.find": 1})
        assert not [e for e in logs if e["event"] == "target.no_symbolic_branches"]
        counters.add("c:target", silent)  # the WARN_AFTER-th
        counters.finish()  # the end: op:target had one result only
        counters.finish()
    warned = {e["target"]: e for e in logs if e["event"] == "target.no_symbolic_branches"}
    assert sorted(warned) == ["c:target", "op:target"]
    assert warned["c:target"]["left_via"] == "c_zlib.decompress" and "C function zlib.decompress" in warned[
        "c:target"]["hint"]
    assert "does not follow bytes.find" in warned["op:target"]["hint"] and warned["op:target"]["results"] == 1


def test_an_engine_that_needs_longer_inputs_than_its_limit_says_so(tmp_path, monkeypatch) -> None:
    """A branch only an input past `max_input_len` takes was an unsat query and nothing else
    (pycdlib's volume descriptors start at 32 KiB): counted `beyond_max_input_len`, and the
    coordinator warns once per target (`engine.input_limit_reached`)."""
    import textwrap

    import structlog.testing

    from symfence.worker.concolic.engine import ConcolicEngine
    from symfence.worker.executors.base import ExitKind, Task

    (tmp_path / "sf_far_target.py").write_text(textwrap.dedent("""
        def target(data):
            if len(data) > 20 and data[20] == 0x41:
                raise ValueError("far")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    short = ConcolicEngine().run_task(Task("t", "w-far", b"\x00" * 4, "sf_far_target:target", 0,
                                           {"max_input_len": 16}))
    assert short.status is ExitKind.OK and short.stats.get("beyond_max_input_len", 0) >= 1, short.stats
    assert not any(len(c.data) > 16 for c in short.candidates)
    roomy = ConcolicEngine().run_task(Task("t", "w-far2", b"\x00" * 4, "sf_far_target:target", 0,
                                           {"max_input_len": 64}))
    assert not roomy.stats.get("beyond_max_input_len") and any(len(c.data) > 20 for c in roomy.candidates)
    with structlog.testing.capture_logs() as logs:
        counters = EngineCounters()
        counters.add("sf_far_target:target", short.stats)
        counters.add("sf_far_target:target", short.stats)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["engine.input_limit_reached"]
