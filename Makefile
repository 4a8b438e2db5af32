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

bench: venv
	$(BIN)/python -m benchmarks vector
	$(BIN)/python -m benchmarks dqn
	$(BIN)/python -m benchmarks ppo
	$(BIN)/python -m benchmarks maml
	$(BIN)/python -m benchmarks maml_curves
	$(BIN)/python -m benchmarks mujoco
	$(BIN)/python -m benchmarks devices
	$(BIN)/python -m benchmarks partial
	$(BIN)/python -m benchmarks ray
	$(BIN)/python -m benchmarks handwritten
	$(BIN)/python -m benchmarks replay
	$(BIN)/python -m benchmarks pixels
	$(BIN)/python -m benchmarks atari

bench-quick: venv
	$(BIN)/python -m benchmarks vector --quick
	$(BIN)/python -m benchmarks dqn --quick
	$(BIN)/python -m benchmarks ppo --quick
	$(BIN)/python -m benchmarks maml --quick
	$(BIN)/python -m benchmarks maml_curves --quick
	$(BIN)/python -m benchmarks mujoco --quick
	$(BIN)/python -m benchmarks devices --quick
	$(BIN)/python -m benchmarks partial --quick
	$(BIN)/python -m benchmarks ray --quick
	$(BIN)/python -m benchmarks handwritten --quick
	$(BIN)/python -m benchmarks replay --quick
	$(BIN)/python -m benchmarks pixels --quick
	$(BIN)/python -m benchmarks atari --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
