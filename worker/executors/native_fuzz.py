"""The native_fuzz Executor: one task = one havoc mutation slice through a target's AFL++ forkserver.

The WORK's data is a ``protocol.fuzzslice`` spec (corpus entries and dictionary tokens this
worker does not have yet for that target), as for Atheris slices. This executor keeps, per
target, a folder with every entry it was sent plus every input its slices kept, and the
dictionary (``tokens``, msgpack), so a slice never resends the whole queue and a replaced child
loses nothing. The slice itself runs in a child (``worker.native.fuzz_slice`` over the seam,
``ChildExecutor``): the parent gives it ``slice_s`` plus a grace, then SIGKILLs its group and
returns what it had streamed. Options: ``protocol.options.NativeFuzzOptions``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import replace

import msgpack

from symfence.protocol.fuzzslice import unpack_spec
from symfence.protocol.options import NativeFuzzOptions
from symfence.worker.childproc import SCRATCH, ChildExecutor, ChildProcess, Running
from symfence.worker.engine_api import ExitKind, Outcome, Phase, Task
from symfence.worker.native.fuzz_slice import TOKENS_FILE

_GRACE_S = 5.0  # past slice_s (+ one execution's time-out twice) the child is killed


class NativeFuzzAdapter:
    """How the slice's child is run and read (``childproc.EngineAdapter``)."""

    engine = "symfence.worker.native.fuzz_slice"
    name = "native_fuzz"
    stderr = SCRATCH
    scratch = True
    eager = False
    cuttable = True  # SIGUSR1 ends the slice after its current execution (worker.native.fuzz_slice)

    def __init__(self, *, start_timeout_s: float = 60.0) -> None:
        self.start_timeout_s = start_timeout_s

    def options(self, task: Task) -> NativeFuzzOptions:
        return NativeFuzzOptions.from_mapping({k: v for k, v in task.options.items() if k != "corpus_dir"})

    def deadline(self, run: Running[NativeFuzzOptions]) -> float:
        opts = run.options
        if run.phase is Phase.LOADING:
            return run.phase_since + self.start_timeout_s
        # From the hand-over, not the phase: a streamed Found must not push the deadline on.
        return run.accepted_at + opts.slice_s + 2 * opts.exec_timeout_s + _GRACE_S

    def killed(self, run: Running[NativeFuzzOptions]) -> Outcome:
        return Outcome(ExitKind.OK, candidates=tuple(run.candidates), wall_s=time.monotonic() - run.started,
                       stats={"child_restarts": 1, "killed_by_parent": 1})

    def died(self, run: Running[NativeFuzzOptions], how: str, child: ChildProcess) -> Outcome:
        tail = child.stderr_tail(2000).decode(errors="replace")
        return Outcome(ExitKind.ERROR, candidates=tuple(run.candidates),
                       wall_s=time.monotonic() - run.started, stats={"child_restarts": 1},
                       error=f"native fuzz child process {how} in its {run.phase.value} phase\n{tail}")


class NativeFuzzExecutor:
    """Executor for native mutation slices; see the module docstring."""

    def __init__(self, *, python: str | None = None, workdir: str | None = None,
                 start_timeout_s: float = 60.0) -> None:
        self._child = ChildExecutor(NativeFuzzAdapter(start_timeout_s=start_timeout_s), python=python)
        self._root = tempfile.mkdtemp(prefix="symfence-native-fuzz-", dir=workdir)
        self._tokens: dict[str, list[bytes]] = {}
        self._ready: Outcome | None = None

    @property
    def child_pid(self) -> int | None:
        return self._child.child_pid

    def corpus_dir(self, target: str) -> str:
        folder = os.path.join(self._root, hashlib.sha256(target.encode()).hexdigest()[:16])
        os.makedirs(folder, exist_ok=True)
        return folder

    def start(self, task: Task) -> None:
        self._ready = None
        try:
            spec = unpack_spec(task.data)
        except ValueError as exc:
            self._ready = Outcome(ExitKind.ERROR, error=f"bad native fuzz slice: {exc}")
            return
        folder = self.corpus_dir(task.target)
        for entry in spec.entries:
            path = os.path.join(folder, hashlib.sha1(entry).hexdigest())
            if not os.path.exists(path):
                with open(path, "wb") as fh:
                    fh.write(entry)
        tokens = self._tokens.setdefault(task.target, [])
        new = [t for t in spec.tokens if t not in tokens]
        if new:
            tokens.extend(new)
            tmp = os.path.join(folder, f".{TOKENS_FILE}.tmp")
            with open(tmp, "wb") as fh:
                fh.write(msgpack.packb(tokens, use_bin_type=True))
            os.replace(tmp, os.path.join(folder, TOKENS_FILE))
        self._child.start(replace(task, options={**task.options, "corpus_dir": folder}))

    def wait(self, timeout_s: float) -> Outcome | None:
        if self._ready is not None:
            outcome, self._ready = self._ready, None
            return outcome
        return self._child.wait(timeout_s)

    def end_turn(self) -> bool:
        """The slice answers after its current execution (``engine_api.Turns``)."""
        return self._ready is None and self._child.end_turn()

    def abort(self) -> None:
        self._ready = None
        self._child.abort()

    def close(self) -> None:
        self._child.close()
        shutil.rmtree(self._root, ignore_errors=True)


def executor() -> NativeFuzzExecutor:
    return NativeFuzzExecutor()
