"""Harnesses whose bug the concolic engine finds and plain Atheris does not (see docs/engine.md)."""
