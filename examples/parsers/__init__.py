"""Fuzz harnesses for real pure-Python parsers from the standard library (none written here).

Each module defines ``target(data: bytes) -> None``, which feeds ``data`` to one parser and
catches only the errors that parser documents for malformed input; anything else escaping is
an unexpected exception, i.e. a finding. ``MODULES`` names the parser's own modules: the
benchmark counts covered lines in those (``python -m bench parsers``). The bytes pass through
``bytes.decode``, ``io.BytesIO`` and ``struct`` on their way in, which the concolic engine does
not follow by itself; that is what the mutation stage is for.
"""

HARNESSES = (
    "examples.parsers.plist_binary:target",
    "examples.parsers.tar_archive:target",
    "examples.parsers.zip_archive:target",
    "examples.parsers.email_message:target",
    "examples.parsers.toml_document:target",
    "examples.parsers.wave_header:target",
)
