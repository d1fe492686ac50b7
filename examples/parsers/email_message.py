"""Harness: the ``email`` package parsing a message from bytes with the modern policy.

``email.policy.default`` parses every header through ``email._header_value_parser``. The email
parser records defects instead of raising for malformed input; the documented exceptions are
``email.errors.MessageError`` and its subclasses (e.g. ``HeaderParseError``).
"""

import email
import email.errors
import email.policy

MODULES = ("email",)


def target(data: bytes) -> None:
    try:
        message = email.message_from_bytes(data, policy=email.policy.default)
        for part in message.walk():
            for _name, value in part.items():
                str(value)
            part.get_content_type()
            part.get_params()
            part.get_filename()
    except email.errors.MessageError:
        pass
