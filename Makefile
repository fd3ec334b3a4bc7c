# The two commands a new user runs (see README): `make parity` (the main job) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= out

.PHONY: setup parity test lint typecheck pytest bench

setup:
	bash scripts/setup.sh

parity: setup
	$(VENV)/bin/vllm-devclient parity --report $(OUT)/parity.md

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: setup
	$(VENV)/bin/mypy

pytest: setup
	$(PY) -m pytest -ra

test: lint typecheck pytest

bench: setup
	$(PY) -m benchmarks --json $(OUT)/benchmarks.json
