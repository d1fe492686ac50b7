"""Joining a shared campaign (issue 29) without MPI: the key and flag, the payload, the status rows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from symfence.coordinator.config import ConfigError, parse
from symfence.coordinator.journal import NewEntry
from symfence.coordinator.shared import open_store, store_problem
from symfence.coordinator.shared.records import Outcome, WorkItem, coordinator_id
from symfence.coordinator.sharedwork import decode_item, default_name, encode_item, store_status_lines
from symfence.protocol.ids import sha256_hex
from tests.mpi_helpers import ROOT


@pytest.mark.parametrize("value", ["mysql://db/x", "campaign.db", "sqlite:", "postgresql://", 7])
def test_a_bad_store_names_its_key(value, tmp_path) -> None:
    with pytest.raises(ConfigError) as exc:
        parse({"campaign": {"executor": "synthetic", "store": value}})
    assert str(exc.value).startswith("campaign.store: ")


def test_good_stores_and_their_tuning_parse(tmp_path) -> None:
    for value in ("", f"sqlite:{tmp_path / 'c.db'}", "postgresql://user@dbhost/campaign1", "postgres://h/d"):
        assert store_problem(value) is None
        cfg = parse({"campaign": {"executor": "synthetic", "store": value}})
        assert cfg["campaign.store"] == value
    assert store_problem(f"sqlite:{tmp_path}") is not None  # a folder
    assert store_problem(f"sqlite:{tmp_path / 'no' / 'c.db'}") is not None  # no such folder
    with pytest.raises(ConfigError, match=r"^store\.coordinator: "):
        parse({"campaign": {"executor": "synthetic"}, "store": {"coordinator": "-bad name"}})
    with pytest.raises(ConfigError, match=r"^store\.lease_s: "):
        parse({"campaign": {"executor": "synthetic"}, "store": {"lease_s": 0.1}})


@pytest.mark.parametrize("argv", [["--store", "bogus"], ["--store", "sqlite:"]])
def test_symfence_run_with_a_bad_store_flag_says_one_line_and_exits_2(tmp_path, argv) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[campaign]\nexecutor = "synthetic"\n')
    cmd = [sys.executable, "-m", "symfence", "run", str(config), "--out", str(tmp_path / "o"), *argv]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "campaign.store (--store):" in lines[0], done.stderr
    assert not (tmp_path / "o").exists()  # nothing was launched


def test_the_payload_carries_what_another_coordinator_runs() -> None:
    data = b"\x00\x01seed"
    entry = NewEntry(sha256=sha256_hex(data), data=data, bound=3, parent=None, origin="concolic", new_bits=2,
                     found_s=0.0, work_id="ab" * 32, target="synthetic")
    item = decode_item(entry.work_id, encode_item(entry))
    assert (item.data, item.sha256, item.target, item.bound, item.new_bits, item.origin, item.seed) == \
        (data, entry.sha256, "synthetic", 3, 2, "concolic", False)
    with pytest.raises(Exception, match="payload"):
        decode_item("w", b"\xc1")


def test_the_default_name_is_a_coordinator_id(tmp_path) -> None:
    name = default_name(tmp_path / "run one")
    assert coordinator_id(name) == name and name.endswith("run_one")


def test_status_lines_show_one_row_per_coordinator_and_its_share(tmp_path: Path) -> None:
    where = f"sqlite:{tmp_path / 'c.db'}"
    store = open_store(where)
    try:
        store.add_work([WorkItem("a"), WorkItem("b"), WorkItem("c")])
        for name, n in (("one", 2), ("two", 1)):
            reg = store.register(coordinator_id(name))
            grant = store.lease(reg.coordinator, reg.epoch, n, 30.0)
            store.commit_batch([(lease, Outcome()) for lease in grant.leases])
    finally:
        store.close()
    lines = store_status_lines(where)
    rows = {line.split()[0]: line.split() for line in lines[3:]}
    assert set(rows) == {"one", "two"}
    assert rows["one"][4] == "2" and rows["one"][-1] == "66.7%" and rows["two"][-1] == "33.3%"
    assert "0 pending, 0 leased, 3 done" in lines[1]
