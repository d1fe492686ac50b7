"""Small targets that each guard a planted ``Found`` behind one construct the concolic engine must follow.

Each module's first docstring line names the construct; ``OPTIONS`` (if any) are the engine
options its campaign needs (e.g. ``instrument``). ``tests/test_concolic_constructs.py`` finds
every one from a single zero byte with the engine alone; ``bench/bench_engine_reach.py``
measures them.
"""


class Found(Exception):
    """The planted bug of a construct target."""
