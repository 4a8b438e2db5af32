# pararl — setup, tests, benchmarks. `make venv` is idempotent: it reinstalls only
# when pyproject.toml changed since the last install.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXTRAS ?= dev,bench,video,ray,atari,minatar

.PHONY: venv test lint typecheck check bench bench-quick train clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and pinned: anything unpinned that needs torch would pull CUDA wheels.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $(STAMP)

test: venv
	$(BIN)/python -m pytest -q

lint: venv
	$(BIN)/ruff check src tests benchmarks compat
	$(BIN)/ruff format --check src tests benchmarks compat
	$(BIN)/lint-imports

typecheck: venv
	$(BIN)/mypy

check: lint typecheck test

train: venv
	$(BIN)/pararl train dqn --env CartPole-v1

# every benchmark `python -m benchmarks --list` names, in its order
bench: venv
	for name in $$($(BIN)/python -m benchmarks --list); do $(BIN)/python -m benchmarks $$name || exit 1; done

bench-quick: venv
	for name in $$($(BIN)/python -m benchmarks --list); do $(BIN)/python -m benchmarks $$name --quick || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
