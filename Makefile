# Entry points for newcomers and CI. Everything installs into .venv so a fresh machine needs only
# python3 (and, for the tests, the Debian packages that .ci/run installs).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-all lint fmt crd bench clean

$(STAMP): pyproject.toml
	[ -x $(BIN)/python ] || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m controller.demo

# pytest exits 5 when nothing was collected; that is not a failure of the suite.
test: $(STAMP)
	$(BIN)/python -m pytest -q; rc=$$?; [ $$rc -eq 5 ] && rc=0; exit $$rc

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m ''; rc=$$?; [ $$rc -eq 5 ] && rc=0; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check controller tests bench
	$(BIN)/ruff format --check controller tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

fmt: $(STAMP)
	$(BIN)/ruff format controller tests bench
	$(BIN)/ruff check --fix controller tests bench

crd: $(STAMP)
	$(BIN)/htc crd --write

bench: $(STAMP)
	$(BIN)/python bench/pipeline.py --ingresses 1000 --json

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
