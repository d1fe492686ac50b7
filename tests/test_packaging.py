"""symfence is one import package: a user's own protocol.py/worker.py/coordinator.py beside their
target cannot shadow it, and a wheel built with `pip` installs only `symfence` and runs a campaign."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.mpi_helpers import ROOT

pytestmark = pytest.mark.mpi

# A user's folder whose module names collide with symfence's sub-packages. Their target imports
# its own `protocol`; symfence must not import any of these.
USER_FILES = {
    "protocol.py": "MAGIC = b'USR'\n",
    "worker.py": "raise SystemExit('symfence imported the user worker.py')\n",
    "coordinator.py": "raise SystemExit('symfence imported the user coordinator.py')\n",
    "examples.py": "raise SystemExit('symfence imported the user examples.py')\n",
    "mytarget.py": (
        "from protocol import MAGIC\n\n"
        "class Found(Exception):\n    pass\n\n"
        "def target(data):\n"
        "    if len(data) > 3 and data.startswith(MAGIC) and data[3] == 0x21:\n"
        "        raise Found('own protocol module used')\n"
    ),
    "campaign.toml": ('[campaign]\nexecutor = "concolic"\ntargets = ["mytarget:target"]\n'
                      'duration_s = 60\nranks = 2\n'),
}


def user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "user"
    folder.mkdir()
    for name, text in USER_FILES.items():
        (folder / name).write_text(text)
    return folder


def run_from(folder: Path, python: str, pythonpath: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([python, "-m", "symfence", "run", "campaign.toml", "--out", "out"], cwd=folder,
                          capture_output=True, text=True, timeout=180, env=env, stdin=subprocess.DEVNULL)


def check_campaign(folder: Path, r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "symfence imported the user" not in r.stdout + r.stderr
    crashes = [p.name for p in (folder / "out" / "crashes").iterdir()]
    # the target used its own protocol.py
    assert any(",sig:Found-mytarget." in name for name in crashes), crashes


SUBPACKAGES = ("protocol", "coordinator", "worker", "tools")


def test_the_checkout_is_one_ordinary_package_that_static_tools_can_follow():
    """symfence/protocol, symfence/coordinator, symfence/worker and symfence/tools are relative
    symlinks to the top-level folders, and nothing extends ``symfence.__path__`` at import time
    (a type checker or an IDE reads the files, it does not run them)."""
    for name in SUBPACKAGES:
        link = ROOT / "symfence" / name
        assert link.is_symlink() and os.readlink(link) == f"../{name}", link
        assert link.resolve() == (ROOT / name).resolve() and (link / "__init__.py").is_file()
    init = (ROOT / "symfence" / "__init__.py").read_text()
    assert "__path__" not in init.replace("``symfence.__path__``", "")
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)}
    code = ("import symfence, symfence.protocol.fence as f, symfence.coordinator.config\n"
            "import symfence.worker.loop\n"
            "print(*symfence.__path__, f.__file__, sep='\\n')")
    r = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(ROOT / "symfence"), str(ROOT / "symfence" / "protocol" / "fence.py")]


def test_user_modules_named_like_symfence_parts_do_not_shadow_it(tmp_path):
    folder = user_folder(tmp_path)
    check_campaign(folder, run_from(folder, sys.executable))


def test_a_built_wheel_holds_only_symfence_and_runs_a_campaign_installed(tmp_path):
    """`pip wheel .`, then that wheel installed into a folder of its own and put first on the path
    (so neither the editable install nor the checkout is used); dependencies come from this venv."""
    wheels, source = tmp_path / "wheels", tmp_path / "source"
    # Build from a clean copy: setuptools' in-tree build/ folder must not leak stale files.
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv*", ".git", "build", "dist", "out", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis",
        ".mypy_cache", ".ruff_cache",  # `make lint` leaves ~20 MB there before the tests run
        "results"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(wheels), str(source)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    wheel = next(wheels.glob("symfence-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.startswith("symfence-")}
    assert top == {"symfence"}, top  # no top-level protocol/, worker/, coordinator/, examples/
    # Every module of the three folders, as files (the wheel holds no symlinks), and each once.
    expected = {f"symfence/{p.relative_to(ROOT).as_posix()}" for name in SUBPACKAGES
                for p in (ROOT / name).rglob("*.py") if "__pycache__" not in p.parts}
    modules = [n for n in names if n.endswith(".py") and n.count("/") > 1]
    assert set(modules) == expected and len(modules) == len(expected), set(modules) ^ expected
    assert "symfence/protocol/fence.py" in names and "symfence/worker/concolic/runner.py" in names
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "License-Expression: MIT" in meta and "License-File: LICENSE" in meta

    site = tmp_path / "site"  # the wheel installed on its own: no editable finder, no checkout on the path
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                              str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site)}
    code = ("import symfence.protocol.fence as f, symfence.coordinator.cli as c, symfence.worker.loop as w;"
            "print(f.__file__, c.__file__, w.__file__, sep='\\n')")
    where = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                           env=env)
    installed = [str(site / "symfence" / p)
                 for p in ("protocol/fence.py", "coordinator/cli.py", "worker/loop.py")]
    assert where.stdout.splitlines() == installed, where.stdout + where.stderr  # the installed copy
    version = subprocess.run([sys.executable, "-m", "symfence", "--version"], capture_output=True, text=True,
                             env=env)
    assert version.stdout.startswith("symfence ")

    folder = user_folder(tmp_path)
    check_campaign(folder, run_from(folder, sys.executable, pythonpath=str(site)))
