"""A "library" for tests/triage_targets.py:library_target: two functions that call ``json``, two bugs."""

import json


def load_config(text: str) -> dict:
    return json.loads(text)


def load_state(text: str) -> dict:
    return json.loads(text[1:])
