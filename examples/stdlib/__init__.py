"""Harnesses around standard-library parsers, for measuring how far the concolic engine follows real code.

Each module has ``target(data: bytes)`` that feeds the input to one parser and ignores the
parser's documented error for bad input; anything else escaping is a finding. Campaigns list
the parser's own modules under ``[concolic] instrument`` so the engine rewrites them too.
"""
