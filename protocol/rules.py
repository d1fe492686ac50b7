"""The wire's rules in one place: every limit and field rule, and the makers of names and texts keeping them.

The encoder (`codec.encode`, which raises `LocalProtocolError`) and the decoder (`codec.decode_*`,
which raises `RemoteProtocolError`) check a message against the rules defined here, with the
same functions, so a message we encode is a message we decode. Anything that produces a name or
a text for the wire (executor counters, dictionary tokens, crash details, error texts) makes it
with `wire_key`, `fit_text`, `fit_counters` or `fit_tokens`, so it is valid by construction.

Keys stay printable ASCII without spaces (docs/design.md, "The wire's rules"): they become
`fuzzer_stats` lines, plot columns and JSON log keys; `wire_key` maps any other name (a long
qualified name, a non-ASCII identifier, spaces) to a valid key deterministically and distinctly.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from dataclasses import dataclass, fields
from typing import Any, Iterable, Mapping, TypeGuard

# --- sizes and counts (the configurable ones are `Limits`; [limits] in the config) ----------


@dataclass(frozen=True)
class Limits:
    """Per-campaign size limits; rank 0 sends them to every worker in SETUP (`to_info`)."""

    max_message_bytes: int = 16 << 20
    max_candidate_bytes: int = 1 << 20  # a candidate's data and each packed trace
    max_candidates: int = 4096  # candidates per RESULT
    max_text_bytes: int = 64 << 10  # any str field (characters)

    def to_info(self) -> dict[str, int]:
        return {f"limits_{f.name}": getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> Limits:
        """The limits a SETUP carries (a field it lacks keeps its default)."""
        values = {f.name: info[f"limits_{f.name}"] for f in fields(cls)
                  if type(info.get(f"limits_{f.name}")) is int}
        return cls(**values)


DEFAULT_LIMITS = Limits()

# Every integer and number on the wire is range-checked: a value the journal (SQLite INTEGER,
# signed 64-bit), a running sum or a JSON log cannot hold is MALFORMED, never an error later.
INT_MAX = (1 << 53) - 1  # identifiers, versions: exact in JSON and far inside int64
COUNT_MAX = (1 << 32) - 1  # per-message counts that get summed (execs, stats): 2**31 sums fit int64
SECONDS_MAX = 1e7  # durations (about 116 days)
NEW_BITS_MAX = 2  # 0 nothing new, 1 new hit count, 2 new edge

KEY_MAX_CHARS = 64  # a stats / info key
MAX_INFO_KEYS = 64  # keys per stats or info map
KEY_RULE = f"1-{KEY_MAX_CHARS} printable ASCII characters, no space"
_KEY = re.compile(r"[\x21-\x7e]{1,%d}" % KEY_MAX_CHARS)

MAX_TOKENS = 1024  # dictionary tokens per RESULT
# libFuzzer drops dictionary entries longer than its Word (FixedWord<64>), so longer tokens are
# never useful: the engine cuts its tokens here, the codec and the fuzz slice spec refuse more.
MAX_TOKEN_BYTES = 64
INFO_TEXT_BYTES = 256  # a short text in a worker's CONTROL info (a host name)
MAX_CONTROL_TOKENS = 1 << 16  # dispatch tokens listed in one CONTROL
# Results (or WORKs) one frame may carry (docs/design.md, "Batched frames"): each still named by
# its own token and fenced on its own. The config's `mpi.max_batch` may only lower it.
MAX_BATCH = 256


class RuleError(ValueError):
    """A value breaks a rule; `field` names where, the message says which rule and what value."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"{field}: {detail}")
        self.field = field
        self.detail = detail


def shown(value: Any, limit: int = 80) -> str:
    """A value as a short, escaped repr for an error text (never the whole of a huge value)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(value) if hasattr(value, '__len__') else '?'} long)"


# --- field rules --------------------------------------------------------------------------------


def is_key(k: Any) -> bool:
    return type(k) is str and _KEY.fullmatch(k) is not None


def is_count(v: Any, maximum: int = COUNT_MAX) -> bool:
    return type(v) is int and 0 <= v <= maximum


def is_seconds(v: Any) -> TypeGuard[float]:
    return type(v) in (int, float) and math.isfinite(v) and 0 <= v <= SECONDS_MAX


def is_token(t: Any) -> bool:
    """One dictionary token."""
    return type(t) is bytes and 0 < len(t) <= MAX_TOKEN_BYTES


def check_counters(m: Mapping[Any, Any], what: str, maximum: int = COUNT_MAX) -> None:
    """A stats / counts map: at most MAX_INFO_KEYS keys, each a key, each value a count."""
    if len(m) > MAX_INFO_KEYS:
        raise RuleError(what, f"{len(m)} keys, more than {MAX_INFO_KEYS}")
    for k, v in m.items():
        if not is_key(k):
            raise RuleError(what, f"key {shown(k)} is not {KEY_RULE}")
        if not is_count(v, maximum):
            raise RuleError(f"{what}.{k}", f"{shown(v)} is not an int in [0, {maximum}]")


def check_tokens(tokens: Any) -> None:
    if type(tokens) is not list or len(tokens) > MAX_TOKENS:
        raise RuleError("tokens", f"expected an array of at most {MAX_TOKENS}")
    for t in tokens:
        if not is_token(t):
            raise RuleError("tokens", f"{shown(t)}: each must be 1..{MAX_TOKEN_BYTES} bytes")


# --- CONTROL: what a worker may put in the info map of each kind it sends ----------------------
# A listed key must have its type; any other key must be a key with a count, duration or short
# text (so a handler can log or sum it, and never meets a value it cannot hold). Kinds the
# coordinator sends (SETUP, CANCEL, STOP) carry scalars, or maps or lists of scalars.
COUNT, SECONDS, TEXT, COUNTS = "count", "seconds", "text", "counts"
INFO_SCHEMA: dict[str, dict[str, str]] = {
    "hello": {"host": TEXT, "pid": COUNT, "max_batch": COUNT},  # max_batch: the most WORKs it takes in one frame
    "heartbeat": {"work_received": COUNT, "busy_s": SECONDS, "rss_mb": COUNT},
    "stop_ack": {"results_sent": COUNT, "result_frames": COUNT, "busy_s": SECONDS, "work_received": COUNT,
                 "max_held": COUNT, "faults": COUNTS},
    "checked": {"host": TEXT, "log_path": TEXT, "files_checked": COUNT, "bad_file": COUNT, "why": TEXT},
    "log": {"event": TEXT, "level": TEXT, "dropped": COUNT},
}


def info_value_ok(kind: str, v: Any) -> bool:
    if kind == COUNT:
        return is_count(v)
    if kind == SECONDS:
        return is_seconds(v)
    if kind == TEXT:
        return type(v) is str and len(v) <= INFO_TEXT_BYTES
    return False


def check_worker_info(kind: str, info: Mapping[Any, Any]) -> None:
    schema = INFO_SCHEMA[kind]
    if len(info) > MAX_INFO_KEYS:
        raise RuleError("control.info", f"{len(info)} keys, more than {MAX_INFO_KEYS}")
    for k, v in info.items():
        if not is_key(k):
            raise RuleError("control.info", f"key {shown(k)} is not {KEY_RULE}")
        want = schema.get(k)
        if want == COUNTS:
            if type(v) is not dict:
                raise RuleError(f"control.info.{k}", "expected a map")
            check_counters(v, f"control.info.{k}")
        elif want is not None:
            if not info_value_ok(want, v):
                raise RuleError(f"control.info.{k}", f"{shown(v)}: expected {want} in range")
        elif not any(info_value_ok(w, v) for w in (COUNT, SECONDS, TEXT)):
            raise RuleError(f"control.info.{k}", f"{shown(v)}: expected a count, duration or short text")


# --- making names and texts that keep the rules ------------------------------------------------

# The engine's counters (RESULT ``stats``) whose name ends in what they count: where the input left
# Python in a run without a branch (``left_via.bytes.hex``), and why the library a harness imports
# could not be loaded rewritten (``not_instrumented.lark.GrammarError``).
LEFT_VIA = "left_via."
NOT_INSTRUMENTED = "not_instrumented."

_PLAIN = re.compile(r"[A-Za-z0-9_.]+")  # what `wire_key` keeps as it is (never its '~')
_UNSAFE = re.compile(r"[^A-Za-z0-9_.]+")
_HASH_CHARS = 10  # 40 bits: distinct names collide with probability ~2**-40 per pair
_MADE = re.compile(r"[A-Za-z0-9_.]{1,%d}~[0-9a-f]{%d}" % (KEY_MAX_CHARS - _HASH_CHARS - 1, _HASH_CHARS))


def wire_key(name: str) -> str:
    """A valid key for `name`, deterministic and distinct: a name of [A-Za-z0-9_.] that fits is
    kept as it is; any other (too long, spaces, punctuation, non-ASCII) becomes its readable
    ASCII form, cut to fit, then '~' and a hash of the whole name (kept names never hold '~').
    A key it made is kept as it is (`wire_key(wire_key(x)) == wire_key(x)`)."""
    if len(name) <= KEY_MAX_CHARS and (_PLAIN.fullmatch(name) or _MADE.fullmatch(name)):
        return name
    ascii_form = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    readable = _UNSAFE.sub("_", ascii_form) or "_"
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    return f"{readable[:KEY_MAX_CHARS - _HASH_CHARS - 1]}~{digest}"


def fit_text(text: str, limit: int = DEFAULT_LIMITS.max_text_bytes) -> str:
    """`text` cut to `limit` characters, keeping its start and (most of) its end: a traceback's
    innermost frame and exception line, which crash signatures are made of, are at the end."""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} characters cut ...]\n"
    head = min(limit // 8, 1024)
    tail = max(limit - head - len(marker), 0)
    return (text[:head] + marker + text[len(text) - tail:])[:limit] if tail else text[-limit:]


FOLDED_KEY = "counters_folded"  # what `fit_counters` adds up past MAX_INFO_KEYS keys


def fit_counters(stats: Mapping[str, int]) -> dict[str, int]:
    """Counters made valid: every name made a key (`wire_key`), values saturated at COUNT_MAX,
    and past MAX_INFO_KEYS keys the smallest counters added up in `counters_folded`. A negative
    or non-integer value is left for the check to refuse (it is a bug, not a name)."""
    made: dict[str, Any] = {}
    for name, value in stats.items():
        key = wire_key(str(name))
        if type(value) is int:
            value = min(value, COUNT_MAX) if key not in made else min(made[key] + value, COUNT_MAX)
        made[key] = value
    if len(made) <= MAX_INFO_KEYS:
        return made
    folded = made.pop(FOLDED_KEY, 0)
    ranked = sorted(made, key=lambda k: (not _PLAIN.fullmatch(k), -made[k] if type(made[k]) is int else 0))
    keep = ranked[:MAX_INFO_KEYS - 1]
    folded += sum(made[k] for k in ranked[MAX_INFO_KEYS - 1:] if type(made[k]) is int)
    out = {k: made[k] for k in keep}
    out[FOLDED_KEY] = min(folded, COUNT_MAX)
    return out


def fit_tokens(tokens: Iterable[bytes]) -> tuple[bytes, ...]:
    """Dictionary tokens that keep the rule: each cut to MAX_TOKEN_BYTES, empty ones and repeats
    dropped, at most MAX_TOKENS."""
    out: dict[bytes, None] = {}
    for t in tokens:
        t = bytes(t)[:MAX_TOKEN_BYTES]
        if t:
            out.setdefault(t, None)
        if len(out) >= MAX_TOKENS:
            break
    return tuple(out)
