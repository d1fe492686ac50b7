"""msgpack codec for wire messages: explicit bytes, strict schema and size checks, never pickle.

`encode` turns a message dataclass into bytes. The `decode_*` functions turn bytes from a peer
into a message or raise `RemoteProtocolError` carrying the classification reason; they never
raise anything else, whatever the bytes (property-tested).

Why this module is over 500 lines: each message kind has a strict decoder and, for RESULT and
WORK (the hot path), a fast path checked equal to it by property tests; the rules they apply
live in rules.py, so what is left here is one encoder and the decoders of five message kinds.
RESULT frames that keep every rule are decoded in C first (typed.py, msgspec); batch frames are
packed in batch.py and the two errors live in errors.py (all re-exported here).
"""

from __future__ import annotations

import builtins
import math
from dataclasses import replace
from typing import Any, Callable, Mapping

import msgpack

from symfence.protocol.ids import HEX64_MATCH as _HEX64_MATCH
from symfence.protocol.ids import DispatchToken, WorkId, is_valid_token
from symfence.protocol.messages import (
    PROTOCOL_VERSION,
    Candidate,
    Control,
    ControlKind,
    Cost,
    Result,
    Status,
    Work,
)
from symfence.protocol.batch import BATCH_HEAD_BYTES, BATCH_OF, encode_batch, pack_frames
from symfence.protocol.errors import LocalProtocolError, RemoteProtocolError
from symfence.protocol.reasons import Reason
from symfence.protocol.typed import results as _typed_results
from symfence.protocol.rules import (COUNT_MAX, DEFAULT_LIMITS, INT_MAX, MAX_BATCH, MAX_CONTROL_TOKENS,
                                     MAX_INFO_KEYS, MAX_TOKEN_BYTES, MAX_TOKENS, NEW_BITS_MAX, SECONDS_MAX,
                                     Limits, RuleError, check_counters, check_tokens, check_worker_info,
                                     is_seconds, is_token)
from symfence.protocol.rules import INFO_SCHEMA as _INFO_SCHEMA


# The rules themselves live in protocol/rules.py (their one home); the limits and ranges are
# imported here by name for the codec's callers.
__all__ = ["BATCH_HEAD_BYTES", "BATCH_OF", "COUNT_MAX", "DEFAULT_LIMITS", "INT_MAX", "MAX_INFO_KEYS", "MAX_TOKEN_BYTES", "MAX_TOKENS",
           "NEW_BITS_MAX", "SECONDS_MAX", "Limits", "LocalProtocolError", "RemoteProtocolError",
           "decode_control", "decode_result", "decode_result_frame", "decode_work", "decode_work_frame",
           "encode", "encode_batch", "encode_map", "encode_work_with", "pack_frames", "result_to_map", "work_head"]


# ---------------------------------------------------------------------------------- encoding


def _pack(obj: dict[str, Any]) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


_pack_list: Callable[[list[Any]], bytes] = msgpack.Packer(use_bin_type=True, autoreset=True).pack


class WorkHead:
    """The fields every WORK of one (executor, target, options, deadline) carries, checked against
    the wire's rules and packed ONCE (`work_head`); `encode_work_with` adds a dispatch's own
    fields (token, input, coverage delta, attempt), checked per WORK, behind these bytes."""

    __slots__ = ("executor", "target", "options", "deadline_s", "limits", "packed")

    def __init__(self, executor: str, target: str, options: CheckedOptions, deadline_s: float, limits: Limits,
                 packed: bytes) -> None:
        self.executor, self.target, self.options, self.deadline_s = executor, target, options, deadline_s
        self.limits, self.packed = limits, packed


# A WORK is a map of 14 keys: the 6 of its head, then the 8 of its dispatch (decoders read a map,
# so the order is free); `_WORK_TAIL_KEYS` packed with their values as one array, whose 3-byte
# array16 header (16 items) is cut off.
_WORK_MAP_HEADER = b"\x8e"
_ARRAY16_HEADER = 3


def work_head(executor: str, target: str, options: Mapping[str, Any], deadline_s: float,
              limits: Limits = DEFAULT_LIMITS) -> WorkHead:
    """The checked, packed head of the WORKs of `executor` on `target` (LocalProtocolError names
    a field the rules refuse, as `encode` does)."""
    opts = options if type(options) is CheckedOptions else dict(options)
    deadline = float(deadline_s) if type(deadline_s) in _NUMBER else deadline_s
    if not _work_head_ok(executor, target, opts, deadline, limits):
        _local(_work_body, _work_map("0" * 64, "0" * 64, b"", "0" * 64, executor, target, 0, opts, deadline,
                                     0, b"", 1), limits)
    if type(opts) is not CheckedOptions or opts.text_limit > limits.max_text_bytes:
        opts = checked_options(opts, limits)  # checked just above: frozen as they are
    head = {"v": PROTOCOL_VERSION, "kind": "work", "executor": executor, "target": target,
            "options": opts, "deadline_s": deadline}
    packed = _pack(head)
    assert packed[0] == 0x86  # a fixmap of the 6 head keys
    return WorkHead(executor, target, opts, deadline, limits, _WORK_MAP_HEADER + packed[1:])


def encode_work_with(head: WorkHead, token: str, work_id: str, data: bytes, sha256: str, bound: int,
                     cov_version: int, cov_delta: bytes, attempt: int) -> bytes:
    """The frame of a WORK: `head`'s bytes and this dispatch's fields, checked by the same rules
    as a whole WORK (`_work_tail_ok`; the full checks name a fault). Decodes to the same `Work`
    as `encode(Work(...))` with the head's fields."""
    limits = head.limits
    if not _work_tail_ok(token, work_id, data, sha256, bound, cov_version, cov_delta, attempt, limits):
        _local(_work_body, _work_map(token, work_id, data, sha256, head.executor, head.target, bound,
                                     head.options, head.deadline_s, cov_version, cov_delta, attempt), limits)
    try:
        tail = _pack_list(["token", token, "work_id", work_id, "data", data, "sha256", sha256, "bound", bound,
                           "cov_version", cov_version, "cov_delta", cov_delta, "attempt", attempt])
    except (TypeError, ValueError, OverflowError) as exc:  # a type the checks let through: a bug here
        raise LocalProtocolError("message", f"cannot be packed: {exc}") from None
    frame = head.packed + tail[_ARRAY16_HEADER:]
    if len(frame) > limits.max_message_bytes:
        raise LocalProtocolError("message", f"{len(frame)} bytes, more than limits.max_message_bytes"
                                            f" = {limits.max_message_bytes}")
    return frame


def encode_work(token: str, work_id: str, data: bytes, sha256: str, executor: str, target: str, bound: int,
                options: Mapping[str, Any], deadline_s: float, cov_version: int, cov_delta: bytes, attempt: int,
                limits: Limits = DEFAULT_LIMITS) -> bytes:
    """The frame of a WORK with these fields, as `encode(Work(...))` gives it, without building
    the `Work` first (a head made for this one WORK; the coordinator keeps its heads)."""
    return encode_work_with(work_head(executor, target, options, deadline_s, limits), token, work_id, data,
                            sha256, bound, cov_version, cov_delta, attempt)


def _work_map(token: str, work_id: str, data: bytes, sha256: str, executor: str, target: str, bound: int,
              options: Mapping[str, Any], deadline_s: Any, cov_version: int, cov_delta: bytes,
              attempt: int) -> dict[str, Any]:
    """A WORK's map, for the full checks that name a fault."""
    return {"v": PROTOCOL_VERSION, "kind": "work", "token": token, "work_id": work_id, "data": data,
            "sha256": sha256, "executor": executor, "target": target, "bound": bound, "options": dict(options),
            "deadline_s": deadline_s, "cov_version": cov_version, "cov_delta": cov_delta, "attempt": attempt}


def _packed(m: dict[str, Any], limits: Limits) -> bytes:
    try:
        frame = _pack(m)
    except (TypeError, ValueError, OverflowError) as exc:  # a type the checks let through: a bug here
        raise LocalProtocolError("message", f"cannot be packed: {exc}") from None
    if len(frame) > limits.max_message_bytes:
        raise LocalProtocolError("message", f"{len(frame)} bytes, more than limits.max_message_bytes"
                                            f" = {limits.max_message_bytes}")
    return frame


def encode(msg: Work | Result | Control, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """The frame of a message, checked first by the decoder's own rules: a message that breaks
    one raises `LocalProtocolError` (naming the field and the value) and nothing is encoded."""
    if isinstance(msg, Work):
        return encode_work(msg.token, msg.work_id, msg.data, msg.sha256, msg.executor, msg.target, msg.bound,
                           msg.options, msg.deadline_s, msg.cov_version, msg.cov_delta, msg.attempt, limits)
    if isinstance(msg, Result):
        m = result_to_map(msg)
        if _result_fast(m, limits) is None:
            _local(_result_body, m, limits)
    elif isinstance(msg, Control):
        m = {"v": PROTOCOL_VERSION, "kind": msg.kind.value, "tokens": list(msg.tokens),
             "info": dict(msg.info)}
        _local(_control_body, m, limits)
    else:
        raise TypeError(f"not a message: {type(msg).__name__}")
    return _packed(m, limits)


def _local(check: Callable[[dict[str, Any], Limits], Any], m: dict[str, Any], limits: Limits) -> None:
    try:
        check(m, limits)
    except RemoteProtocolError as exc:
        raise LocalProtocolError(exc.detail.split(":", 1)[0], exc.detail) from None


def result_to_map(msg: Result) -> dict[str, Any]:
    """The plain map of a RESULT (the worker's single sender and the fault injector edit it)."""
    return {
        "v": PROTOCOL_VERSION,
        "kind": "result",
        "token": msg.token,
        "work_id": msg.work_id,
        "status": msg.status.value,
        "candidates": [
            {
                "data": c.data,
                "sha256": c.sha256,
                "trace": c.trace,
                "kind": c.kind.value,
                "bound": c.bound,
                "new_bits": c.new_bits,
                "detail": c.detail,
            }
            for c in msg.candidates
        ],
        "cost": {
            "wall_s": float(msg.cost.wall_s),
            "cpu_s": float(msg.cost.cpu_s),
            "solver_s": float(msg.cost.solver_s),
            "execs": msg.cost.execs,
        },
        "cov_version": msg.cov_version,
        "trace": msg.trace,
        "error": msg.error,
        "stats": dict(msg.stats),
        "tokens": list(msg.tokens),
        **({} if msg.resume_at is None else {"resume_at": msg.resume_at}),
    }


def encode_map(obj: dict[str, Any]) -> bytes:
    """Encode an already-built map (used by the fault injector to send deliberately bad frames)."""
    return _pack(obj)


def _items(obj: dict[str, Any], kind: str) -> list[dict[str, Any] | RemoteProtocolError]:
    """A batch's items: each a map of our version, or the error that item is judged by (a fault of
    the batch itself, its list, raises)."""
    items = obj.get("items")
    if type(items) is not list or not 1 <= len(items) <= MAX_BATCH:
        raise RemoteProtocolError(Reason.MALFORMED, f"{kind}.items: expected an array of 1..{MAX_BATCH} maps")
    out: list[dict[str, Any] | RemoteProtocolError] = []
    for i, item in enumerate(items):
        if type(item) is not dict:
            out.append(RemoteProtocolError(Reason.MALFORMED, f"{kind}[{i}]: not a map"))
            continue
        version = item.get("v")
        token = item.get("token")
        if type(version) is not int:
            out.append(RemoteProtocolError(Reason.MALFORMED, f"{kind}[{i}]: missing or non-int protocol version 'v'",
                                           token=token if type(token) is str else None))
        elif version != PROTOCOL_VERSION:
            out.append(RemoteProtocolError(Reason.INCOMPATIBLE, f"protocol version {version}, expected"
                                           f" {PROTOCOL_VERSION}", token=token if type(token) is str else None))
        else:
            out.append(item)
    return out


# ---------------------------------------------------------------------------------- decoding


class _Fields:
    """Typed field access on a decoded map; every violation is a MALFORMED remote error."""

    def __init__(self, m: Mapping[str, Any], what: str, limits: Limits) -> None:
        self.m = m
        self.what = what
        self.limits = limits

    def _bad(self, key: str, expected: str) -> RemoteProtocolError:
        return RemoteProtocolError(
            Reason.MALFORMED,
            f"{self.what}.{key}: expected {expected}, got {type(self.m.get(key)).__name__}",
        )

    def int(self, key: str, *, minimum: int = 0, maximum: int = INT_MAX) -> int:
        v = self.m.get(key)
        if type(v) is not int or not minimum <= v <= maximum:
            raise self._bad(key, f"int in [{minimum}, {maximum}]")
        return v

    def float(self, key: str, *, maximum: float = SECONDS_MAX) -> float:
        v: Any = self.m.get(key)
        if type(v) not in (int, float) or not math.isfinite(v) or not 0 <= v <= maximum:
            raise self._bad(key, f"finite number in [0, {maximum:g}]")
        return float(v)

    def str(self, key: str, *, hex64: bool = False) -> str:
        v = self.m.get(key)
        if type(v) is not str or len(v) > self.limits.max_text_bytes:
            raise self._bad(key, "str")
        if hex64 and not is_valid_token(v):
            raise RemoteProtocolError(Reason.MALFORMED, f"{self.what}.{key}: not 64 lowercase hex")
        return v

    def bytes(self, key: builtins.str, *, limit: builtins.int) -> bytes:
        v = self.m.get(key)
        if type(v) is not bytes or len(v) > limit:
            raise self._bad(key, f"bytes <= {limit}")
        return v

    def list(self, key: builtins.str, *, limit: builtins.int) -> list[Any]:
        v = self.m.get(key)
        if type(v) is not list or len(v) > limit:
            raise self._bad(key, f"array <= {limit}")
        return v

    def map(self, key: builtins.str) -> dict[builtins.str, Any]:
        v = self.m.get(key)
        if type(v) is not dict:
            raise self._bad(key, "map")
        return v

    def enum(self, key: builtins.str, enum_type: Callable[[builtins.str], Any]) -> Any:
        v = self.str(key)
        try:
            return enum_type(v)
        except ValueError:
            raise RemoteProtocolError(
                Reason.MALFORMED, f"{self.what}.{key}: unknown value {v!r}"
            ) from None


_SCALARS = (str, int, float, bool, type(None))


def _scalar_ok(v: Any, limits: Limits) -> bool:
    t = type(v)
    if t is int:
        return -INT_MAX <= v <= INT_MAX
    if t is float:
        return math.isfinite(v)
    if t is str:
        return len(v) <= limits.max_text_bytes
    return t is bool or v is None


def _scalar_map(m: dict[str, Any], what: str, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    for k, v in m.items():
        if type(k) is not str or not _scalar_ok(v, limits):
            raise RemoteProtocolError(Reason.MALFORMED, f"{what}: values must be scalars in range")
    return m


def _int_map(m: dict[str, Any], what: str, maximum: int = COUNT_MAX) -> dict[str, int]:
    try:
        check_counters(m, what, maximum)
    except RuleError as exc:
        raise RemoteProtocolError(Reason.MALFORMED, str(exc)) from None
    return m


def _envelope(frame: bytes, limits: Limits) -> dict[str, Any]:
    """Size, msgpack, map, version. Envelope faults beat a version mismatch (we cannot even
    tell which version a non-map speaks); body faults are only judged for our own version."""
    if len(frame) > limits.max_message_bytes:
        raise RemoteProtocolError(
            Reason.MALFORMED, f"oversized: {len(frame)} > {limits.max_message_bytes} bytes"
        )
    try:
        obj = msgpack.unpackb(frame, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # hostile bytes: any unpacker failure is the peer's fault
        raise RemoteProtocolError(Reason.MALFORMED, f"undecodable: {type(exc).__name__}") from None
    if type(obj) is not dict:
        raise RemoteProtocolError(Reason.MALFORMED, f"not a map: {type(obj).__name__}")
    version = obj.get("v")
    if type(version) is not int:
        raise RemoteProtocolError(Reason.MALFORMED, "missing or non-int protocol version 'v'")
    if version != PROTOCOL_VERSION:
        token = obj.get("token")
        raise RemoteProtocolError(
            Reason.INCOMPATIBLE,
            f"protocol version {version}, expected {PROTOCOL_VERSION}",
            token=token if isinstance(token, str) else None,
        )
    return obj


def _token(obj: dict[str, Any], f: _Fields) -> DispatchToken:
    if "token" not in obj:
        raise RemoteProtocolError(Reason.MISSING, "no token field")
    return DispatchToken(f.str("token", hex64=True))


def decode_result(frame: bytes, limits: Limits = DEFAULT_LIMITS) -> Result:
    """The result of a single-result frame (a batch is MALFORMED here: `decode_result_frame`)."""
    result = _result_item(_envelope(frame, limits), limits)
    if isinstance(result, RemoteProtocolError):
        raise result
    return result


def decode_result_frame(frame: bytes, limits: Limits = DEFAULT_LIMITS) -> list[Result | RemoteProtocolError]:
    """The results of a RESULT frame, in order: its one result, or a batch's items. A fault of the
    frame (size, msgpack, version, a batch that is no array of 1..MAX_BATCH) raises
    RemoteProtocolError; a fault of one item is that item's error in its place, and the other
    items are judged on their own. A frame that keeps every rule is decoded in C (typed.py)."""
    if len(frame) <= limits.max_message_bytes:
        fast = _typed_results(frame, limits)
        if fast is not None:
            return fast  # type: ignore[return-value]
    return _result_frame_checked(frame, limits)


def _result_frame_checked(frame: bytes, limits: Limits = DEFAULT_LIMITS) -> list[Result | RemoteProtocolError]:
    """`decode_result_frame` by the hand-written checks alone (they name every fault)."""
    obj = _envelope(frame, limits)
    if obj.get("kind") != "results":
        return [_result_item(obj, limits)]
    return [item if isinstance(item, RemoteProtocolError) else _result_item(item, limits)
            for item in _items(obj, "results")]


def _result_item(obj: dict[str, Any], limits: Limits) -> Result | RemoteProtocolError:
    result = _result_fast(obj, limits)
    if result is not None:  # every check passed on the straight path
        return result
    try:
        return _result_body(obj, limits)
    except RemoteProtocolError as exc:
        exc.work_id = obj.get("work_id") if isinstance(obj.get("work_id"), str) else None
        exc.token = obj.get("token") if isinstance(obj.get("token"), str) else None
        return exc


def _result_body(obj: dict[str, Any], limits: Limits) -> Result:
    f = _Fields(obj, "result", limits)
    if obj.get("kind") != "result":
        raise RemoteProtocolError(Reason.MALFORMED, f"kind {obj.get('kind')!r} on the result tag")
    work_id = WorkId(f.str("work_id", hex64=True))
    status = f.enum("status", Status)
    candidates = []
    for i, raw in enumerate(f.list("candidates", limit=limits.max_candidates)):
        if type(raw) is not dict:
            raise RemoteProtocolError(Reason.MALFORMED, f"candidates[{i}]: not a map")
        c = _Fields(raw, f"candidates[{i}]", limits)
        candidates.append(
            Candidate(
                data=c.bytes("data", limit=limits.max_candidate_bytes),
                sha256=c.str("sha256", hex64=True),
                trace=c.bytes("trace", limit=limits.max_candidate_bytes),
                kind=c.enum("kind", Status),
                bound=c.int("bound", maximum=COUNT_MAX),
                new_bits=c.int("new_bits", maximum=NEW_BITS_MAX),
                detail=c.str("detail"),
            )
        )
    cost_map = f.map("cost")
    c = _Fields(cost_map, "cost", limits)
    cost = Cost(c.float("wall_s"), c.float("cpu_s"), c.float("solver_s"),
                c.int("execs", maximum=COUNT_MAX))
    result = Result(
        token=DispatchToken(""),
        work_id=work_id,
        status=status,
        candidates=tuple(candidates),
        cost=cost,
        cov_version=f.int("cov_version"),
        trace=f.bytes("trace", limit=limits.max_candidate_bytes),
        error=f.str("error"),
        stats=_int_map(f.map("stats"), "result.stats"),
        tokens=_tokens(obj, f),
        resume_at=f.int("resume_at", maximum=COUNT_MAX) if "resume_at" in obj else None,
    )
    # The token is judged last: a body fault is MALFORMED whether or not a token is present.
    return replace(result, token=_token(obj, f))


_STATUS_OF = {s.value: s for s in Status}
_NUMBER = (int, float)
_isfinite = math.isfinite


def _hex64(v: Any) -> bool:
    return type(v) is str and len(v) == 64 and _HEX64_MATCH(v) is not None


_seconds = is_seconds


def _result_fast(obj: dict[str, Any], limits: Limits) -> Result | None:
    """The common case of `_result_body`, in one pass without per-field objects: the same
    checks (tests/test_protocol_fuzz.py holds them equal), None as soon as any fails, so the
    slow path can name the exact fault and its precedence. Never raises."""
    get: Callable[[str], Any] = obj.get  # wire values, checked by hand
    token, work_id, status = get("token"), get("work_id"), get("status")
    text, blob = limits.max_text_bytes, limits.max_candidate_bytes
    if (get("kind") != "result" or text < 64 or not _hex64(token) or not _hex64(work_id)
            or type(status) is not str or status not in _STATUS_OF):
        return None
    raw_candidates, cost, trace, error = get("candidates"), get("cost"), get("trace"), get("error")
    cov_version, stats = get("cov_version"), get("stats")
    if (type(raw_candidates) is not list or len(raw_candidates) > limits.max_candidates
            or type(cost) is not dict or type(trace) is not bytes or len(trace) > blob
            or type(error) is not str or len(error) > text
            or type(cov_version) is not int or not 0 <= cov_version <= INT_MAX or type(stats) is not dict):
        return None
    wall_s, cpu_s, solver_s, execs = cost.get("wall_s"), cost.get("cpu_s"), cost.get("solver_s"), cost.get("execs")
    if (not _seconds(wall_s) or not _seconds(cpu_s) or not _seconds(solver_s)
            or type(execs) is not int or not 0 <= execs <= COUNT_MAX):
        return None
    candidates = []
    for raw in raw_candidates:
        if type(raw) is not dict:
            return None
        c: Callable[[str], Any] = raw.get
        data, sha, ctrace, kind, bound, new_bits, detail = (
            c("data"), c("sha256"), c("trace"), c("kind"), c("bound"), c("new_bits"), c("detail"))
        if (type(data) is not bytes or len(data) > blob or not _hex64(sha)
                or type(ctrace) is not bytes or len(ctrace) > blob
                or type(kind) is not str or kind not in _STATUS_OF
                or type(bound) is not int or not 0 <= bound <= COUNT_MAX
                or type(new_bits) is not int or not 0 <= new_bits <= NEW_BITS_MAX
                or type(detail) is not str or len(detail) > text):
            return None
        candidates.append(Candidate(data, sha, ctrace, _STATUS_OF[kind], bound, new_bits, detail))
    if stats:
        try:
            _int_map(stats, "result.stats")
        except RemoteProtocolError:
            return None
    tokens: tuple[bytes, ...] = ()
    if "tokens" in obj:
        raw_tokens = obj["tokens"]
        if type(raw_tokens) is not list or len(raw_tokens) > MAX_TOKENS or not all(map(is_token, raw_tokens)):
            return None
        tokens = tuple(raw_tokens)
    resume_at = None
    if "resume_at" in obj:  # optional: absent is a task that ran to its end
        resume_at = obj["resume_at"]
        if type(resume_at) is not int or not 0 <= resume_at <= COUNT_MAX:
            return None
    return Result(token, work_id, _STATUS_OF[status], tuple(candidates),
                  Cost(float(wall_s), float(cpu_s), float(solver_s), execs),
                  cov_version, trace, error, stats, tokens, resume_at)


def _tokens(obj: dict[str, Any], f: _Fields) -> tuple[bytes, ...]:
    """A result's dictionary tokens (optional: absent is none)."""
    if "tokens" not in obj:
        return ()
    try:
        check_tokens(obj["tokens"])
    except RuleError as exc:
        raise RemoteProtocolError(Reason.MALFORMED, str(exc)) from None
    return tuple(obj["tokens"])


def _work_fast(obj: dict[str, Any], limits: Limits) -> Work | None:
    """The common case of `decode_work` in one pass (same checks; None when any fails, so the
    full path names the fault). Never raises."""
    if not _work_valid(obj, limits):
        return None
    get: Callable[[str], Any] = obj.get  # wire values, checked by hand
    return Work(get("token"), get("work_id"), get("data"), get("sha256"), get("executor"), get("target"),
                get("bound"), get("options"), float(get("deadline_s")), get("cov_version"), get("cov_delta"),
                get("attempt"))


class CheckedOptions(dict[str, Any]):
    """Executor options already checked against the wire's rules (`checked_options`), and frozen
    so they stay so: the encoder does not check them again for every WORK that carries them."""

    text_limit = 0  # the max_text_bytes they were checked against

    def _frozen(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("checked options are read-only")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = _frozen  # type: ignore[assignment]


def checked_options(options: Mapping[str, Any], limits: Limits = DEFAULT_LIMITS) -> CheckedOptions:
    """`options` checked once as a WORK's options (LocalProtocolError names a bad one)."""
    bad = _bad_option(options, limits)
    if bad is not None:
        raise LocalProtocolError("options", f"option {bad[0]!r} = {bad[1]!r}: values must be scalars in range")
    checked = CheckedOptions(options)
    checked.text_limit = limits.max_text_bytes
    return checked


def _work_valid(obj: dict[str, Any], limits: Limits) -> bool:
    """Whether `_work_fast` would decode the map: its head's rules and its dispatch's."""
    get: Callable[[str], Any] = obj.get  # wire values, checked by hand
    return (get("kind") == "work"
            and _work_head_ok(get("executor"), get("target"), get("options"), get("deadline_s"), limits)
            and _work_tail_ok(get("token"), get("work_id"), get("data"), get("sha256"), get("bound"),
                              get("cov_version"), get("cov_delta"), get("attempt"), limits))


def _work_head_ok(executor: Any, target: Any, options: Any, deadline_s: Any, limits: Limits) -> bool:
    """The rules of a WORK's head fields (options made by `checked_options` for these limits'
    text size are not checked again)."""
    text = limits.max_text_bytes
    if (type(executor) is not str or len(executor) > text or type(target) is not str or len(target) > text
            or not _seconds(deadline_s)):
        return False
    if type(options) is CheckedOptions and options.text_limit <= text:
        return True
    return type(options) is dict and _bad_option(options, limits) is None


def _work_tail_ok(token: Any, work_id: Any, data: Any, sha: Any, bound: Any, cov_version: Any, delta: Any,
                  attempt: Any, limits: Limits) -> bool:
    """The rules of a WORK's per-dispatch fields."""
    size = limits.max_message_bytes
    return not (limits.max_text_bytes < 64 or not _hex64(token) or not _hex64(work_id) or not _hex64(sha)
                or type(data) is not bytes or len(data) > size or type(delta) is not bytes or len(delta) > size
                or type(bound) is not int or not 0 <= bound <= COUNT_MAX
                or type(cov_version) is not int or not 0 <= cov_version <= INT_MAX
                or type(attempt) is not int or not 1 <= attempt <= COUNT_MAX)


def _bad_option(options: Mapping[Any, Any], limits: Limits) -> tuple[Any, Any] | None:
    """The first option a WORK may not carry (a key that is no str, a value that is no scalar in
    range), or None: the one rule for WORK options, checked per WORK or once (`checked_options`)."""
    for k, v in options.items():
        if type(k) is not str or not _scalar_ok(v, limits):
            return k, v
    return None


def decode_work(frame: bytes, limits: Limits = DEFAULT_LIMITS) -> Work:
    """The WORK of a single-WORK frame (a batch is MALFORMED here: `decode_work_frame`)."""
    obj = _envelope(frame, limits)
    work = _work_fast(obj, limits)
    if work is not None:  # every check passed on the straight path
        return work
    return _work_body(obj, limits)


def decode_work_frame(frame: bytes, limits: Limits = DEFAULT_LIMITS) -> list[Work | RemoteProtocolError]:
    """The WORKs of a WORK frame, in order: its one WORK, or a batch's items (faults as in
    `decode_result_frame`)."""
    obj = _envelope(frame, limits)
    if obj.get("kind") != "works":
        return [_work_item(obj, limits)]
    return [item if isinstance(item, RemoteProtocolError) else _work_item(item, limits)
            for item in _items(obj, "works")]


def _work_item(obj: dict[str, Any], limits: Limits) -> Work | RemoteProtocolError:
    work = _work_fast(obj, limits)
    if work is not None:
        return work
    try:
        return _work_body(obj, limits)
    except RemoteProtocolError as exc:
        return exc


def _work_body(obj: dict[str, Any], limits: Limits) -> Work:
    f = _Fields(obj, "work", limits)
    if obj.get("kind") != "work":
        raise RemoteProtocolError(Reason.MALFORMED, f"kind {obj.get('kind')!r} on the work tag")
    token = _token(obj, f)
    return Work(
        token=token,
        work_id=WorkId(f.str("work_id", hex64=True)),
        data=f.bytes("data", limit=limits.max_message_bytes),
        sha256=f.str("sha256", hex64=True),
        executor=f.str("executor"),
        target=f.str("target"),
        bound=f.int("bound", maximum=COUNT_MAX),
        options=_scalar_map(f.map("options"), "work.options", limits),
        deadline_s=f.float("deadline_s"),
        cov_version=f.int("cov_version"),
        cov_delta=f.bytes("cov_delta", limit=limits.max_message_bytes),
        attempt=f.int("attempt", minimum=1, maximum=COUNT_MAX),
    )


# What a worker may put in the info map of each CONTROL kind it sends: protocol/rules.py.
INFO_SCHEMA: dict[ControlKind, dict[str, str]] = {ControlKind(k): v for k, v in _INFO_SCHEMA.items()}


def _worker_info(kind: ControlKind, info: dict[str, Any]) -> dict[str, Any]:
    try:
        check_worker_info(kind.value, info)
    except RuleError as exc:
        raise RemoteProtocolError(Reason.MALFORMED, str(exc)) from None
    return info


def _nested_scalars(info: dict[str, Any], limits: Limits) -> dict[str, Any]:
    for k, v in info.items():
        if type(k) is not str:
            raise RemoteProtocolError(Reason.MALFORMED, "control.info: keys must be str")
        if type(v) is dict:
            _scalar_map(v, f"control.info.{k}", limits)
        elif type(v) is list:
            if not all(_scalar_ok(x, limits) for x in v):
                raise RemoteProtocolError(Reason.MALFORMED, f"control.info.{k}: expected a list of scalars")
        elif not _scalar_ok(v, limits):
            raise RemoteProtocolError(Reason.MALFORMED, f"control.info.{k}: expected a scalar in range")
    return info


def decode_control(frame: bytes, limits: Limits = DEFAULT_LIMITS) -> Control:
    return _control_body(_envelope(frame, limits), limits)


def _control_body(obj: dict[str, Any], limits: Limits) -> Control:
    f = _Fields(obj, "control", limits)
    kind = f.enum("kind", ControlKind)
    tokens = f.list("tokens", limit=MAX_CONTROL_TOKENS)
    if not all(is_valid_token(t) for t in tokens):
        raise RemoteProtocolError(Reason.MALFORMED, "control.tokens: not 64 lowercase hex")
    info = f.map("info")
    info = _worker_info(kind, info) if kind in INFO_SCHEMA else _nested_scalars(info, limits)
    return Control(kind=kind, tokens=tuple(DispatchToken(t) for t in tokens), info=info)
