"""OSS-Fuzz-style Atheris harnesses on pure-Python PyPI packages (the `bench` extra), run unchanged.

Each module is written as OSS-Fuzz's Python harnesses are: ``TestOneInput(data)``, the package
imported under ``atheris.instrument_imports()``, ``atheris.Setup``/``atheris.Fuzz`` under
``__main__``; most split the input with ``atheris.FuzzedDataProvider``. ``bench/bench_harnesses.py``
runs each under ``symfence run fuzz_x.py`` and under plain Atheris and compares them.
"""
