# The two commands a new user runs (see README): `make parity` (the main job) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= out

.PHONY: setup parity test lint typecheck pytest dist-check sdist-test bench figures record drift generate release

setup:
	bash scripts/setup.sh

parity: setup
	$(VENV)/bin/vllm-devclient parity --report $(OUT)/parity.md

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/generate.py --check
	$(PY) scripts/import_graph.py --check

# Write again everything derived from the records and the async sources (scripts/generate.py, which runs
# scripts/unasync.py for the sync code); `make lint` runs it with --check.
generate: setup
	$(PY) scripts/generate.py

typecheck: setup
	$(VENV)/bin/mypy

pytest: setup
	$(PY) -m pytest -ra

# The sdist and the wheel: build, twine check --strict, metadata, [all] without test packages, and the
# command in a core-only install (scripts/check_dist.py says what each check needs).
dist-check: setup
	$(PY) scripts/check_dist.py

# The same, then the sdist's own tests in a fresh venv without vLLM (a few minutes; not part of `make test`).
sdist-test: setup
	$(PY) scripts/check_dist.py --sdist-tests

test: lint typecheck pytest dist-check

# Every benchmark; the numbers go to benchmarks/results.json (committed: machine, date, every row with its
# baseline and ratio), and the docs' speed figures are written again from them.
bench: setup
	$(PY) -m benchmarks --json benchmarks/results.json
	$(PY) scripts/figures.py

# Every figure in the docs, written again from the committed artifacts (scripts/figures.py says which);
# tests/test_doc_figures.py fails when a doc and its artifact disagree.
figures: setup
	$(PY) scripts/figures.py

# Re-record rust_fixtures/ for every installed release (.venv's vLLM, then each .venv-vllm-*/ of
# docs/releases.md), or re-record them and fail on any difference from the committed fixtures (repository
# tooling: tools/fixtures/, not part of the wheel).
RELEASES := $(PY) $(wildcard .venv-vllm-*/bin/python)

record: setup
	$(PY) -m tools.fixtures record $(addprefix --python ,$(RELEASES))

drift: setup
	$(PY) -m tools.fixtures drift $(addprefix --python ,$(RELEASES))

# A vLLM release from the package index to supported, in its own venv: `make release V=0.35.0` (tools/train:
# install, survey both frontends, record, compare with the release before, tables; docs/train/V.md says
# what needs a person).
release: setup
	$(PY) -m tools.train $(V) $(ARGS)
