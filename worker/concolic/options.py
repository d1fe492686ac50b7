"""Concolic task options under the engine's import path: re-exports ``protocol.options``.

The schema lives in ``protocol/options.py`` so the coordinator's config check and the engine
share it without the coordinator importing worker code; this module defines nothing.
"""

from __future__ import annotations

from symfence.protocol.options import EngineOptions, OptionError

__all__ = ["EngineOptions", "OptionError"]
