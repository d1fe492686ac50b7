"""A newcomer fuzzes their own parser from the README alone, in a folder outside the repository.

The test takes the files and commands from README.md's "Fuzz your own target" section (so the
README cannot drift from what works), runs them in a fresh folder under /tmp with symfence
found as an installed package, and checks the findings the README promises."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mpi_helpers import ROOT

pytestmark = [pytest.mark.mpi, pytest.mark.heavy]


def readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def fenced_blocks(section: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)


def test_fuzz_your_own_target_as_the_readme_says(tmp_path):
    assert not str(tmp_path).startswith(str(ROOT))
    section = readme_section("Fuzz your own target")
    files, commands = {}, []
    for lang, body in fenced_blocks(section):
        first = body.splitlines()[0]
        if lang in ("python", "toml") and re.fullmatch(r"# [\w.]+\.(py|toml)", first):
            files[first[2:]] = body
        elif lang == "sh":
            commands += [line.split("#")[0].strip() for line in body.splitlines() if line.startswith("symfence ")]
    assert set(files) == {"msgparse.py", "campaign.toml"} and commands[0].startswith("symfence run")
    folder = tmp_path / "msgfuzz"
    folder.mkdir()
    for name, body in files.items():
        (folder / name).write_text(body)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # symfence as installed, nothing else
    results = []
    for line in commands:
        argv = [sys.executable, "-m", "symfence", *shlex.split(line)[1:]]
        results.append(subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=180, env=env,
                                      stdin=subprocess.DEVNULL))
        assert results[-1].returncode == 0, (line, results[-1].stdout[-3000:], results[-1].stderr[-3000:])
    run, status = results[0], results[1]
    assert "campaign finished: work exhausted" in run.stdout
    crashes = sorted(p.name for p in (folder / "out" / "crashes").iterdir())
    # the two findings the README describes, with the names it shows
    assert any(re.search(r",sig:IndexError-msgparse\.[^,]*,target:msgparse\.target$", n) for n in crashes), crashes
    assert any(re.search(r",sig:MemoryError-[^,]*,kind:oom,target:msgparse\.target$", n) for n in crashes), crashes
    assert re.search(r"unique crashes 2 \(1 out of memory\)", run.stdout), run.stdout
    assert re.search(r"task errors\s+: 0", status.stdout) and re.search(r"crashes\s+: 2", status.stdout), status.stdout
    assert (folder / "out" / "plots" / "coverage.png").exists()
    # the replay command from the README, on the IndexError input
    replay = re.search(r"`(python -c .*?)`", section).group(1).replace("out/crashes/id:000000*", "")
    index_error = next(p for p in (folder / "out" / "crashes").iterdir() if "IndexError" in p.name)
    r = subprocess.run([*shlex.split(replay.replace("python", sys.executable, 1)), str(index_error)], cwd=folder,
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 1 and r.stderr.strip().endswith("IndexError: index out of range"), r.stderr
