"""Offline triage tools (replay, corpus minimization, coverage report, pytest) over a campaign's output.

``symfence.tools`` sits above both halves of a campaign: it reads what rank 0 wrote (the config
snapshot, the journal, read-only) and runs targets with the workers' own runners (the plain
replay, the real tracer, the native oracles), in fresh processes and without MPI. Nothing in
``symfence.coordinator`` or ``symfence.worker`` imports it; the CLI only dispatches to it.
"""
