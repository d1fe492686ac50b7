# Two commands do all the set-up on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
OUT    ?= out/demo

.PHONY: demo synthetic test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# A real campaign on the embedded default (3 ranks: 1 coordinator + 2 workers).
demo: $(STAMP)
	rm -rf $(OUT)
	$(BIN)/symfence run configs/demo.toml --out $(OUT)

# The synthetic-executor campaign (no targets, 1 ms tasks).
synthetic: $(STAMP)
	rm -rf out/synthetic
	$(BIN)/symfence run configs/synthetic.toml --out out/synthetic

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) out bench/results .pytest_cache .hypothesis
