# Two commands for a new user (see README.md): `make demo` and `make test`; `make test-fast` is the
# loop while editing (CONTRIBUTING.md).
# Both create (once) and reuse a virtual environment in .venv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test test-fast lint gpu-check install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

## Run the main job on the embedded default (SQLite, no GPU needed).
demo: $(STAMP)
	$(BIN)/python -m ci demo

# `make test` runs the suite in parallel, one test file per worker process (pytest-xdist, at most 4;
# the tests of one file share its fixtures and order): on the 2-core box 9.5 minutes against 18.4 run
# one test at a time (2026-12-07). PYTEST_PARALLEL= (empty) runs it serially.
PYTEST_PARALLEL ?= -n auto --maxprocesses 4 --dist loadfile

## Lint, then the whole test suite (GPU cases skip without a GPU).
test: $(STAMP) lint
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

## Everything but the tests marked slow (tests/conftest.py says which): under a minute on 2 cores.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

## ruff's lint rules; `ruff format` is not enforced (pyproject.toml's [tool.ruff] says why). Then
## mypy (configured in pyproject.toml's [tool.mypy]) over ci/ (the site included) and ragged_kernels/.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m mypy ci ragged_kernels

## On a machine with an NVIDIA GPU: gpu-marked tests plus a short benchmark table.
gpu-check:
	bash tools/gpu_check.sh

clean:
	rm -rf $(VENV) .asv .demo .pytest_cache .ruff_cache
