"""The real-parser harnesses (examples/parsers/) and the two-stage target (examples/sealed_command.py)."""

from __future__ import annotations

import importlib
import io
import itertools
import plistlib
import tarfile
import wave
import zipfile

import pytest

from examples import sealed_command
from examples.parsers import HARNESSES
from symfence.worker.concolic.engine import ConcolicEngine
from symfence.worker.executors.base import ExitKind, Task


def _harness(spec: str):
    module_name, _, function = spec.partition(":")
    return getattr(importlib.import_module(module_name), function)


def _tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as archive:
        info = tarfile.TarInfo("hello.txt")
        info.size = 5
        archive.addfile(info, io.BytesIO(b"hello"))
    return buf.getvalue()


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("hello.txt", b"hello")
    return buf.getvalue()


def _wav() -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(8000)
        writer.writeframes(b"\x00\x01" * 16)
    return buf.getvalue()


VALID = {
    "plist_binary": lambda: plistlib.dumps({"a": [1, 2.5, b"x", True]}, fmt=plistlib.FMT_BINARY),
    "tar_archive": _tar,
    "zip_archive": _zip,
    "email_message": lambda: b"From: A <a@example.com>\r\nTo: b@example.com\r\nSubject: hi\r\n"
                             b"Content-Type: text/plain; charset=utf-8\r\n\r\nbody\r\n",
    "toml_document": lambda: b'title = "x"\n[owner]\nname = "y"\ndob = 1979-05-27T07:32:00-08:00\n',
    "wave_header": _wav,
}

# Malformed inputs each parser rejects with one of its documented errors (which the harness catches).
MALFORMED = [b"", b"\x00" * 7, b"\xff" * 600, b"bplist00" + b"\x00" * 40, b"PK\x05\x06" + b"\x00" * 18,
             b"RIFF\x04\x00\x00\x00WAVE", b"a = [1, 2", b"\xc3\x28 = 1"]


def test_every_harness_has_valid_and_malformed_inputs_covered():
    assert {spec.split(":")[0].rsplit(".", 1)[-1] for spec in HARNESSES} == set(VALID)


@pytest.mark.parametrize("spec", HARNESSES)
def test_harness_parses_a_valid_document_and_rejects_garbage_quietly(spec):
    target = _harness(spec)
    target(VALID[spec.split(":")[0].rsplit(".", 1)[-1]]())
    for data in MALFORMED:
        target(data)  # documented errors are caught: nothing escapes


@pytest.mark.parametrize("spec", HARNESSES)
def test_harness_names_the_parser_modules_it_feeds(spec):
    module = importlib.import_module(spec.split(":")[0])
    for name in module.MODULES:
        assert importlib.util.find_spec(name) is not None


def test_harness_lets_an_undocumented_exception_escape():
    # Found by Atheris: a truncated RIFF file makes wave's chunk reader raise RuntimeError
    # (a bare RuntimeError from _Chunk.seek), which is neither wave.Error nor EOFError: a finding.
    data = bytes.fromhex("52494646f90a2733574156450c0c0c6aefefefefefef")
    try:
        wave.open(io.BytesIO(data), "rb").close()
    except (wave.Error, EOFError):
        pytest.skip("this Python's wave module rejects the input with a documented error")
    except RuntimeError:
        pass
    else:
        pytest.skip("this Python's wave module accepts the input")
    with pytest.raises(RuntimeError):
        _harness("examples.parsers.wave_header:target")(data)


def _search(seed: bytes, tasks: int = 20) -> tuple[int, list[bytes]]:
    """In-process generational search (what a concolic-only campaign does); (tasks run, crashes)."""
    engine, queue, seen, crashes, done = ConcolicEngine(), [seed], {seed}, [], 0
    while queue and done < tasks:
        data = queue.pop(0)
        done += 1
        outcome = engine.run_task(Task(token="0" * 64, work_id=f"w{done}", data=data,
                                       target="examples.sealed_command:target"))
        for c in outcome.candidates:
            if c.kind is ExitKind.CRASH:
                crashes.append(c.data)
            elif c.data not in seen:
                seen.add(c.data)
                queue.append(c.data)
    return done, crashes


def test_sealed_command_engine_alone_runs_out_of_work_without_the_bug():
    done, crashes = _search(b"\x00")
    assert crashes == [] and done < 20  # exhausted: the seal is never a recorded branch


def test_sealed_command_engine_solves_the_key_behind_a_sealed_header():
    header = next(h for h in (i.to_bytes(8, "little") for i in itertools.count()) if sealed_command.sealed(h))
    _, crashes = _search(header + bytes(8) + b"payload")
    assert crashes
    with pytest.raises(sealed_command.SealedCommandBug):
        sealed_command.target(crashes[0])
    assert crashes[0][:8] == header  # the solver left the seal intact
