# The two commands a new user runs (see README): `make parity` (the main job) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= out

.PHONY: help setup parity test lint typecheck pytest dist-check sdist-test bench figures record drift generate release

# `make help`: every target and its line (the `## ` comment after it).
help:  ## list the targets, one line each
	@grep -E '^[a-z][a-z-]*:.*## ' $(firstword $(MAKEFILE_LIST)) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  %-11s %s\n", $$1, $$2}'

setup:  ## create .venv: the SDK editable with every extra, dev tools, a CPU-only vLLM (idempotent)
	bash scripts/setup.sh

parity: setup  ## the main job: the real Python and Rust frontends on a scripted engine, the parity table
	$(VENV)/bin/vllm-devclient parity --report $(OUT)/parity.md

lint: setup  ## ruff, ruff format --check, the generated-code, import-graph and size checks
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/generate.py --check
	$(PY) scripts/import_graph.py --check
	$(PY) scripts/sizes.py --check

# Write again everything derived from the records and the async sources (scripts/generate.py, which runs
# scripts/unasync.py for the sync code); `make lint` runs it with --check.
generate: setup  ## write again everything derived from the route records and the async sources
	$(PY) scripts/generate.py

typecheck: setup  ## mypy --strict
	$(VENV)/bin/mypy

# On pytest-xdist workers, a test file (or a group of files sharing a costly fixture) to each at a time:
# tests/xdist_units.py. Many tests wait on servers and deadlines, so 3 workers suit a 2-core machine;
# `make pytest WORKERS=0` runs everything in one process.
WORKERS ?= 3

pytest: setup  ## every test suite (unit, replay, contract, the GPU suite's CPU tests), on pytest-xdist workers
	$(PY) -m pytest -ra -n $(WORKERS) --dist loadgroup

# The sdist and the wheel: build, twine check --strict, metadata, [all] without test packages, and the
# command in a core-only install (scripts/check_dist.py says what each check needs).
dist-check: setup  ## build the sdist and wheel and check them
	$(PY) scripts/check_dist.py

# The same, then the sdist's own tests in a fresh venv without vLLM (a few minutes; not part of `make test`).
sdist-test: setup  ## dist-check, then the sdist's own tests in a fresh venv (minutes)
	$(PY) scripts/check_dist.py --sdist-tests

test: lint typecheck pytest dist-check  ## what CI runs: lint, typecheck, pytest, dist-check

# Every benchmark; the numbers go to benchmarks/results.json (committed: machine, date, every row with its
# baseline and ratio), and the docs' speed figures are written again from them.
bench: setup  ## every benchmark into benchmarks/results.json, and the docs' speed figures
	$(PY) -m benchmarks --json benchmarks/results.json
	$(PY) scripts/figures.py

# Every figure in the docs, written again from the committed artifacts (scripts/figures.py says which);
# tests/test_doc_figures.py fails when a doc and its artifact disagree.
figures: setup  ## every figure in the docs, from the committed artifacts
	$(PY) scripts/figures.py

# Re-record rust_fixtures/ for every installed release (.venv's vLLM, then each .venv-vllm-*/ of
# docs/releases.md), or re-record them and fail on any difference from the committed fixtures (repository
# tooling: tools/fixtures/, not part of the wheel).
RELEASES := $(PY) $(wildcard .venv-vllm-*/bin/python)

record: setup  ## re-record rust_fixtures/ for every installed vLLM release
	$(PY) -m tools.fixtures record $(addprefix --python ,$(RELEASES))

drift: setup  ## re-record the fixtures and fail on any difference
	$(PY) -m tools.fixtures drift $(addprefix --python ,$(RELEASES))

# A vLLM release from the package index to supported, in its own venv: `make release V=0.35.0` (tools/train:
# install, survey both frontends, record, compare with the release before, tables; docs/train/V.md says
# what needs a person).
release: setup  ## a vLLM release from the package index to supported: make release V=0.35.0
	$(PY) -m tools.train $(V) $(ARGS)
