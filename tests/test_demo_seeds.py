"""The demo's seeds and dictionary (configs/demo.toml, examples/parsers/): what makes `make demo`
find the README's three bugs in every run. The seeds are small VALID files of each format (the
bugs sit behind byte-level damage to a real header or central directory, which mutation reaches
from a valid file in seconds, and from one zero byte only sometimes within the budget); none of
them crashes a harness; the dictionary holds the formats' magic numbers; the config names both."""

from __future__ import annotations

import io
import tomllib
import wave
import zipfile
from pathlib import Path

from examples.parsers import wave_header, zip_archive
from symfence.coordinator.config import load
from symfence.coordinator.fuzzdict import read_tokens
from symfence.coordinator.preflight import check_dictionary, check_seeds
from tests.mpi_helpers import ROOT

DEMO = ROOT / "configs" / "demo.toml"
SEEDS = ROOT / "examples" / "parsers" / "seeds"


def test_the_demo_uses_the_seeds_and_the_dictionary_and_preflight_accepts_them(monkeypatch):
    raw = tomllib.loads(DEMO.read_text())
    assert (ROOT / raw["campaign"]["seeds"]).resolve() == SEEDS.resolve()
    assert (ROOT / raw["fuzz"]["dict"]).is_file()
    monkeypatch.chdir(ROOT)  # `make demo` runs from the repository's root; paths are relative to it
    cfg = load(DEMO)
    check_seeds(cfg)
    check_dictionary(cfg)


def test_the_seeds_are_valid_files_of_each_format_and_crash_no_harness():
    files = {p.suffix: p.read_bytes() for p in SEEDS.iterdir()}
    assert set(files) == {".wav", ".zip"}
    with wave.open(io.BytesIO(files[".wav"]), "rb") as reader:
        assert reader.getnframes() > 0 and reader.readframes(reader.getnframes())
    with zipfile.ZipFile(io.BytesIO(files[".zip"])) as archive:
        (info,) = archive.infolist()
        assert info.compress_type == zipfile.ZIP_STORED and archive.read(info)
        assert info.flag_bits & 0x800  # a UTF-8 file name: its bytes are decoded when the archive is read
    for data in files.values():  # each target gets every seed
        wave_header.target(data)
        zip_archive.target(data)


def test_the_dictionary_holds_the_formats_magic_numbers():
    tokens = set(read_tokens(Path(ROOT / tomllib.loads(DEMO.read_text())["fuzz"]["dict"])))
    assert {b"RIFF", b"WAVE", b"fmt ", b"data", b"PK\x01\x02", b"PK\x03\x04", b"PK\x05\x06"} <= tokens
