"""Config errors are one line naming the key with exit code 2; output-dir misuse is refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from symfence.coordinator.config import ConfigError, load, parse
from tests.mpi_helpers import ROOT


def test_defaults_fill_in():
    cfg = parse({})
    assert cfg["dispatch.depth"] == 2
    assert cfg["campaign.executor"] == "synthetic"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"dispatch": {"depth": 0}}, "dispatch.depth"),
        ({"dispatch": {"depth": "2"}}, "dispatch.depth"),
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


def test_cli_invalid_toml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[dispatch\n")
    for path in (bad, tmp_path / "nope.toml"):
        r = _symfence("run", str(path))
        assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_cli_refuses_existing_campaign_without_resume(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[campaign]\nduration_s = 1\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "journal.sqlite").write_bytes(b"")
    r = _symfence("run", str(cfg), "--out", str(out))
    assert r.returncode == 2 and "--resume" in r.stderr
    r = _symfence("run", str(cfg), "--out", str(tmp_path / "empty"), "--resume")
    assert r.returncode == 2 and "no campaign journal" in r.stderr
