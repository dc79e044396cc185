# The two commands: `make run` (start the service, embedded mode) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install install-gpu run test lint format migrate key bench bench-gpu clean

install: $(STAMP)

# torch first, pinned, by pip (which takes the CPU build where the machine keeps one), so nothing pulls a CUDA build
# from the registry; then the rest by uv, which leaves that torch in place: the same packages as pip installs (a fresh
# clone's whole install: 46 s instead of 87 on two cores, 2026-12-01). --compile-bytecode, as pip does: where
# PYTHONDONTWRITEBYTECODE is set (this machine sets it) nothing else writes .pyc files, and every process would compile
# what it imports (a CI run took 45 CPU minutes instead of 37).
UV_VERSION := 0.13.9
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is required, found " + sys.version.split()[0])'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0 uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e '.[worker,dev]'
	touch $(STAMP)

# A GPU inference host: also cuBLAS for CUDA 12, which CTranslate2 needs on a GPU (docs/gpu.md).
install-gpu: install
	$(PY) -m pip install --quiet -e '.[worker,gpu]'

run: install
	$(PY) -m app.cli serve

# Four pytest-xdist workers, each taking whole files of tests/ (tests/conftest.py): on two cores, while one waits on
# a stack's processes the others run (fresh-clone runs of `.ci/run` on this 2-core machine: 18.7 minutes with four,
# 20.0 with three, 23.8 with two taking whole folders). TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 4
test: install
	$(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# ruff (lint + format) over the tree, mypy strict on model/, app/ and worker/ (settings in pyproject.toml).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# What ruff can fix, then the formatting: what make lint checks, rewritten in place.
format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

migrate: install
	$(PY) -m app.cli migrate

key: install
	$(PY) -m app.cli create-key $(or $(NAME),$(USER),local)

bench: install
	$(PY) bench/train_throughput.py

# Every GPU figure within 8 minutes, on a GPU host, with that host's own Python and PyTorch (docs/gpu.md).
bench-gpu:
	bash bench/gpu_suite.sh

clean:
	rm -rf $(VENV) var .pytest_cache
