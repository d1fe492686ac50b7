"""The journal writer's backlog of queue/ files is background work: one slice at a time, then
a rest three times as long as the slice took; every file is still written, each once."""

import time

from symfence.coordinator import writer as writer_mod
from symfence.coordinator.journal import CorpusEntry, Journal
from symfence.coordinator.outputs import OutputDir
from symfence.coordinator.writer import BACKLOG_SHARE, FILES_PER_SLICE, JournalWriter


def entries(n: int) -> list[CorpusEntry]:
    return [CorpusEntry(queue_id=i, sha256="0" * 64, data=b"seed %d" % i, target="t", bound=0, parent=None,
                        origin="seed", new_bits=0, found_s=0.0, work_id="w%d" % i) for i in range(n)]


def make_writer(tmp_path) -> tuple[JournalWriter, OutputDir, Journal]:
    journal = Journal.open(tmp_path / "journal.sqlite", resume=False)
    out = OutputDir(tmp_path / "out")
    errors: list[BaseException] = []
    w = JournalWriter(journal, out, lambda fn, *a: fn(*a), lambda b, r: None, lambda b, e: errors.append(e))
    return w, out, journal


def queue_names(out: OutputDir) -> list[str]:
    return sorted(p.name for p in out.queue.iterdir() if not p.name.startswith("."))


def test_one_slice_then_a_rest_three_times_as_long(tmp_path):
    w, out, journal = make_writer(tmp_path)
    w.stop()  # the thread has ended: drive one slice by hand, on a clock of our own
    w._stopping = False
    ticks = iter([100.0, 100.2])
    w._clock = lambda: next(ticks)
    w.add_files(entries(FILES_PER_SLICE + 100))
    assert w.files_cpu_s == 0.0
    w._write_files()
    assert len(queue_names(out)) == FILES_PER_SLICE  # one slice, not the whole backlog
    assert w.files_cpu_s > 0.0  # its CPU, which hotpath.py reports apart from the journal's
    assert w.files_pending == 100
    rest = 0.2 * (1 - BACKLOG_SHARE) / BACKLOG_SHARE
    assert abs(w._rest_until - (100.2 + rest)) < 1e-9
    assert abs(rest - 0.6) < 1e-9  # BACKLOG_SHARE 0.25: the backlog gets a quarter of the time
    assert w.drain_files() == 100  # the end of the run writes the rest at once
    assert len(queue_names(out)) == FILES_PER_SLICE + 100
    journal.close()


def test_the_thread_writes_the_whole_backlog_each_file_once(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_mod, "FILES_PER_SLICE", 50)  # several slices and rests
    w, out, journal = make_writer(tmp_path)
    w.add_files(entries(230))
    deadline = time.monotonic() + 60
    while w.files_pending and time.monotonic() < deadline:
        time.sleep(0.01)
    w.stop()
    names = queue_names(out)
    assert len(names) == 230 and w.files_written == 230
    assert [int(n.split(",")[0].removeprefix("id:")) for n in names] == list(range(230))
    assert (out.queue / names[7]).read_bytes() == b"seed 7"
    journal.close()
