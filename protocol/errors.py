"""The two protocol errors: a peer's fault (`RemoteProtocolError`, a quarantine reason) and ours (`LocalProtocolError`).

codec.py raises and re-exports both (import them from there or here: the same classes).
"""

from __future__ import annotations

from symfence.protocol.reasons import Reason


class RemoteProtocolError(Exception):
    """The peer sent something we cannot accept. `reason` is how the fence classifies it."""

    def __init__(
        self, reason: Reason, detail: str, *, token: str | None = None, work_id: str | None = None
    ) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail
        self.token = token
        self.work_id = work_id


class LocalProtocolError(Exception):
    """We were about to send something the wire's rules refuse (h11's split: our fault, not the
    peer's). `field` names the field, `detail` the rule and the value; nothing was sent."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(detail)
        self.field = field
        self.detail = detail
