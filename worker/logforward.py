"""Forwards a worker's warnings and errors to rank 0 as CONTROL `log` frames, rate-limited and bounded.

A structlog processor (coordinator/log.py `configure(forward=...)`): every event at level warning
or above is copied, reduced to what the codec's CONTROL info schema accepts (at most MAX_FIELDS
fields, values as non-negative numbers or text of at most MAX_TEXT characters), and sent if the
token bucket allows (RATE_PER_S, BURST); what the bucket refused is counted and reported as
`dropped` with the next event that goes. The event itself is always written to the local log.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from symfence.protocol.rules import INFO_TEXT_BYTES, KEY_MAX_CHARS, is_count, is_seconds

FORWARDED_LEVELS = frozenset({"warning", "error", "critical"})
RATE_PER_S = 20.0
BURST = 50.0
MAX_FIELDS = 16
MAX_TEXT = min(240, INFO_TEXT_BYTES)  # the wire rule (protocol/rules.py) is the bound
_SKIP = frozenset({"event", "level", "rank", "role", "ts", "timestamp"})


class LogForwarder:
    def __init__(
        self, send: Callable[[dict[str, Any]], None], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.send = send
        self.clock = clock
        self.tokens = BURST
        self.last = clock()
        self.dropped = 0
        self.sent = 0

    def __call__(self, logger: Any, name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        if event_dict.get("level") in FORWARDED_LEVELS:
            now = self.clock()
            self.tokens = min(BURST, self.tokens + (now - self.last) * RATE_PER_S)
            self.last = now
            if self.tokens < 1.0:
                self.dropped += 1
            else:
                self.tokens -= 1.0
                self.send(self.info(event_dict))
                self.sent += 1
        return event_dict

    def info(self, event_dict: dict[str, Any]) -> dict[str, Any]:
        info: dict[str, Any] = {
            "event": _text(event_dict.get("event")),
            "level": _text(event_dict.get("level")),
        }
        for k, v in event_dict.items():
            if len(info) >= MAX_FIELDS:
                break
            key = "".join(c for c in str(k) if "!" <= c <= "~")[:KEY_MAX_CHARS]
            if key and key not in _SKIP and key not in info:
                info[key] = _value(v)
        if self.dropped:
            info["dropped"], self.dropped = self.dropped, 0
        return info


def _text(v: Any) -> str:
    s = v if isinstance(v, str) else repr(v)
    return s if len(s) <= MAX_TEXT else s[: MAX_TEXT - 3] + "..."


def _value(v: Any) -> Any:
    return v if is_count(v) or is_seconds(v) else _text(v)
