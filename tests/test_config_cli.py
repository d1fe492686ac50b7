"""Config errors are one line naming the key with exit code 2; output-dir misuse is refused."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from symfence.coordinator.config import DEFAULT_PYTHON_EXECUTOR, SCHEMA, ConfigError, load, parse
from tests.mpi_helpers import ROOT


def test_defaults_fill_in():
    cfg = parse({"campaign": {"targets": ["parser:target"]}})
    assert cfg["dispatch.depth"] == 2
    # targets but no executor: the Python engine, never the synthetic benchmark
    assert cfg["campaign.executor"] == DEFAULT_PYTHON_EXECUTOR == "hybrid"
    assert parse({"campaign": {"executor": "synthetic"}})["campaign.targets"] == ["synthetic"]


def test_no_targets_and_no_executor_is_an_error_not_the_benchmark():
    with pytest.raises(ConfigError) as e:
        parse({})
    assert e.value.key == "campaign.targets" and "synthetic" in str(e.value)


@pytest.mark.parametrize("section", [s for s in SCHEMA if s != "concolic"] + ["concolic.options"])
def test_unknown_key_in_every_table_is_an_error(section):
    raw: dict = {"campaign": {"targets": ["parser:target"]}}
    head, _, sub = section.partition(".")
    table = raw.setdefault(head, {})
    if sub:
        table = table.setdefault(sub, {})
    table["no_such_key"] = 1
    with pytest.raises(ConfigError) as e:
        parse(raw)
    assert e.value.key == f"{section}.no_such_key"


@pytest.mark.parametrize(("options", "key"), [
    ({"exec_timeout_s": "1"}, "concolic.options.exec_timeout_s"),
    ({"max_branches": 2.5}, "concolic.options.max_branches"),
    ({"pin_concretised": 1}, "concolic.options.pin_concretised"),
    ({"memory_limit_mb": -1}, "concolic.options.memory_limit_mb"),
    ({"exec_timout_s": 1.0}, "concolic.options.exec_timout_s"),
])
def test_concolic_options_are_checked_in_the_config(options, key):
    with pytest.raises(ConfigError) as e:
        parse({"campaign": {"targets": ["parser:target"]}, "concolic": {"options": options}})
    assert e.value.key == key


@pytest.mark.parametrize(("spec", "words"), [
    ("parser", "no ':'"),
    ("parser:", "not a function name"),
    ("my-parser:target", "not a module path"),
])
def test_malformed_target_spec_is_a_config_error(spec, words):
    with pytest.raises(ConfigError) as e:
        parse({"campaign": {"targets": [spec]}})
    assert e.value.key == "campaign.targets" and words in str(e.value) and spec in str(e.value)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"dispatch": {"depth": 0}}, "dispatch.depth"),
        ({"dispatch": {"depth": "2"}}, "dispatch.depth"),
        ({"dispatch": {"depth": "Auto"}}, "dispatch.depth"),
        ({"dispatch": {"depth": 2.0}}, "dispatch.depth"),
        ({"dispatch": {"depth": True}}, "dispatch.depth"),
        ({"dispatch": {"max_depth": 0}}, "dispatch.max_depth"),
        ({"synthetic": {"change_after_s": -1}}, "synthetic.change_after_s"),
        ({"campaign": {"seed_first": -1}}, "campaign.seed_first"),
        ({"campaign": {"seed_first": "many"}}, "campaign.seed_first"),
        ({"dispatch": {"dept": 2}}, "dispatch.dept"),
        ({"campaing": {}}, "campaing"),
        ({"campaign": {"executor": "afl"}}, "campaign.executor"),
        ({"campaign": {"executor": "concolic"}}, "campaign.targets"),
        ({"faults": {"stale": 1.5}}, "faults.stale"),
        ({"synthetic": {"distribution": "normal"}}, "synthetic.distribution"),
    ],
)
def test_bad_values_name_their_key(raw, key):
    with pytest.raises(ConfigError) as e:
        parse(raw)
    assert e.value.key == key
    assert str(e.value).startswith(key + ":")


def test_depth_is_a_positive_integer_or_auto():
    assert parse({"campaign": {"executor": "synthetic"}, "dispatch": {"depth": "auto"}})["dispatch.depth"] == "auto"
    assert parse({"campaign": {"executor": "synthetic"}, "dispatch": {"depth": 7}})["dispatch.depth"] == 7
    with pytest.raises(ConfigError, match=r'integer in \[1, 256\] or "auto"'):
        parse({"dispatch": {"depth": -3}})
    with pytest.raises(ConfigError, match=r"dispatch.max_depth.*integer in \[1, 256\]"):
        parse({"dispatch": {"max_depth": 257}})


def test_orphan_after_s_leaves_room_for_the_coordinators_beats():
    base = {"campaign": {"executor": "synthetic"}}
    assert parse(base)["workers.orphan_after_s"] == 60.0
    assert parse({**base, "workers": {"orphan_after_s": 0}})["workers.orphan_after_s"] == 0
    with pytest.raises(ConfigError, match=r"workers.orphan_after_s.*>= 3 \* workers.heartbeat_s = 3"):
        parse({**base, "workers": {"orphan_after_s": 2.0}})


def test_shipped_configs_are_valid():
    for path in sorted((ROOT / "configs").glob("*.toml")):
        load(path)


def _symfence(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-c", "import sys; from symfence.coordinator.cli import main; sys.exit(main())", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=60)


def test_cli_config_error_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[dispatch]\ndepth = -1\n")
    r = _symfence("run", str(bad))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert "dispatch.depth" in r.stderr
    bad.write_text('[campaign]\nexecutor = "synthetic"\n[dispatch]\ndepth = "fast"\n')
    r = _symfence("run", str(bad))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert r.stderr.strip().endswith('dispatch.depth: must be an integer in [1, 256] or "auto", got \'fast\'')


def test_cli_invalid_toml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[dispatch\n")
    for path in (bad, tmp_path / "nope.toml"):
        r = _symfence("run", str(path))
        assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_cli_refuses_existing_campaign_without_resume(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[campaign]\nexecutor = "synthetic"\nduration_s = 1\n')
    out = tmp_path / "out"
    out.mkdir()
    (out / "journal.sqlite").write_bytes(b"")
    r = _symfence("run", str(cfg), "--out", str(out))
    assert r.returncode == 2 and "--resume" in r.stderr
    r = _symfence("run", str(cfg), "--out", str(tmp_path / "empty"), "--resume")
    assert r.returncode == 2 and "no campaign journal" in r.stderr


def test_the_configuration_reference_lists_every_key():
    """docs/configuration.md's key table names every key of SCHEMA (the faults' probabilities by name)."""
    doc = (ROOT / "docs" / "configuration.md").read_text()
    missing = [f"{s}.{k}" for s, keys in SCHEMA.items() for k in keys
               if f"`{s}.{k}`" not in doc and not (s == "faults" and f"`{k}`" in doc)]
    assert not missing, f"add to docs/configuration.md: {missing}"


def test_a_worker_rank_imports_structlog_without_rich():
    """A worker rank logs to its file only: structlog is imported with rich hidden, before anything
    else imports it (the log module did, so the rank paid for rich anyway). The rank's loop and
    endpoint are stand-ins here: what is checked is the order of the rank's own imports."""
    code = textwrap.dedent('''
        import sys, types
        loop = types.ModuleType("symfence.worker.loop")
        class Worker:
            def __init__(self, *args): pass
            def run(self): return 0
        loop.Worker, loop.EXIT_ORPHANED = Worker, 99
        endpoint = types.ModuleType("symfence.worker.endpoint")
        endpoint.Endpoint = lambda comm: None
        sys.modules.update({"symfence.worker.loop": loop, "symfence.worker.endpoint": endpoint})
        from symfence.coordinator import cli
        cli._finalize_with_watchdog = lambda *args: None
        assert cli._worker_rank(None, None) == 0
        print("structlog" in sys.modules, sys.modules.get("rich") is not None)
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"], done.stdout
