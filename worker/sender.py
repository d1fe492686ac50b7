"""The single result sender: the only way a genuine RESULT leaves a worker."""

from __future__ import annotations

from typing import Callable

from symfence.protocol.codec import encode_map, result_to_map
from symfence.protocol.ids import DispatchToken, is_valid_token
from symfence.protocol.messages import Result


class ResultSender:
    """Copies the result and overwrites its token with the token of the WORK it answers.

    Every exit path of the worker (success, crash, hang, executor exception, input
    materialization failure) answers through `send`, so none can forget or forge the token.
    """

    def __init__(self, transmit: Callable[[bytes], None]) -> None:
        self._transmit = transmit
        self.sent = 0

    def seal(self, token: DispatchToken, result: Result) -> bytes:
        """The frame `send` would transmit: a copy of the result stamped with `token`."""
        if not is_valid_token(token):
            raise ValueError("refusing to answer without a valid dispatch token")
        m = result_to_map(result)
        m["token"] = token
        return encode_map(m)

    def send(self, token: DispatchToken, result: Result) -> bytes:
        frame = self.seal(token, result)
        self._transmit(frame)
        self.sent += 1
        return frame
