"""Issue 10: `symfence logs` prints worker-supplied text inert, and a line's rank is its file's."""

from __future__ import annotations

import argparse
import io
import json

from symfence.coordinator.logtail import escape, format_event, run_logs


def test_escape_neutralises_line_breaks_ansi_and_bidi():
    text = escape("a\nb\r\x1b[2J\x07\u202e\u2028c\x9b")
    assert text == "a\\x0ab\\x0d\\x1b[2J\\x07\\u202e\\u2028c\\x9b"
    assert escape(12) == "12"


def test_format_event_is_one_line_whatever_the_fields_hold():
    line = format_event({"ts": "bad", "rank": "0\n", "event": "x\ny", "level": "\x1b[31m",
                         "error\n": "boom\n{\"event\":\"forged\"}"})
    assert "\n" not in line and "\x1b" not in line


def test_a_worker_log_cannot_speak_for_rank_0(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    forged = {"ts": 1.0, "rank": 0, "event": "campaign.finished", "level": "info", "reason": "forged"}
    (logs / "worker-3.jsonl").write_text(json.dumps(forged) + "\n[1, 2]\nnot json\n")
    out = io.StringIO()
    args = argparse.Namespace(outdir=str(tmp_path), follow=False, event=None, reason=None, rank=None, json=True)
    assert run_logs(args, out) == 0
    lines = [json.loads(l) for l in out.getvalue().splitlines()]
    forged_out = [e for e in lines if e["event"] == "campaign.finished"]
    assert len(forged_out) == 1 and forged_out[0]["rank"] == 3 and forged_out[0]["claimed_rank"] == 0
    assert sorted(e["event"] for e in lines) == ["campaign.finished"] + ["logs.unparsable_line"] * 2
    assert all(e["rank"] == 3 for e in lines)
