# pararl — setup, tests, benchmarks. `make venv` is idempotent: it reinstalls only
# when pyproject.toml changed since the last install.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXTRAS ?= dev,docs,bench,video,ray,atari,minatar,popgym
# A package index for torch alone, e.g. PyTorch's CPU one (PyPI's Linux wheel is the
# CUDA build): make venv TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=

.PHONY: venv venv-sf test lint typecheck docs docs-serve check bench bench-quick train gpu-check clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and pinned: anything unpinned that needs torch would pull CUDA wheels.
	$(BIN)/python -m pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $(STAMP)

# Sample Factory, an anchor of `python -m benchmarks pixels` (Pong), in an environment
# of its own: it pins gymnasium 0.29, pararl needs 1.x.
SF_VENV := .venv-sf
venv-sf: $(SF_VENV)/.installed

$(SF_VENV)/.installed:
	test -x $(SF_VENV)/bin/python || $(PYTHON) -m venv $(SF_VENV)
	$(SF_VENV)/bin/python -m pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(SF_VENV)/bin/python -m pip install -q sample-factory==2.1.1 ale-py==0.9.1
	touch $@

# Python's bytecode cache on, even where PYTHONDONTWRITEBYTECODE is set (as in many
# containers): the suite starts hundreds of Python processes (test workers, `pararl`
# programs, Ray actors, benchmark anchors) that would each compile pararl's modules
# again, and pytest rewrites every test module's asserts on each run without it
# (collecting the tests: 15 s of CPU per test worker without the cache, 10 s with it).
test: venv
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q

lint: venv
	$(BIN)/ruff check src tests benchmarks compat docs/hooks.py
	$(BIN)/ruff format --check src tests benchmarks compat docs/hooks.py
	$(BIN)/lint-imports

typecheck: venv
	$(BIN)/mypy

# the documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link, anchor
# or API reference fails the build
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# the same site served at http://127.0.0.1:8000, rebuilt on every change
docs-serve: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

check: lint typecheck test

train: venv
	$(BIN)/pararl train dqn --env CartPole-v1

# every benchmark `python -m benchmarks --list` names, in its order
bench: venv
	for name in $$($(BIN)/python -m benchmarks --list); do $(BIN)/python -m benchmarks $$name || exit 1; done

bench-quick: venv
	for name in $$($(BIN)/python -m benchmarks --list); do $(BIN)/python -m benchmarks $$name --quick || exit 1; done

# On a machine with a CUDA GPU (at most ~8 minutes): the CUDA tests, the learner and
# device-placement benchmarks on the GPU, and short Pong PPO and DQN pipeline runs beside
# SB3 zoo's on the same machine; each writes
# its BENCHMARKS.md section (`*_cuda`) with the GPU's name. GPU_PYTHON: an interpreter
# that already has pararl's dependencies and a CUDA build of torch (default: .venv).
GPU_PYTHON ?=
GPY := $(or $(GPU_PYTHON),$(BIN)/python)
gpu-check: $(if $(GPU_PYTHON),,venv)
	$(GPY) -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu-check: torch sees no CUDA device')"
	$(GPY) -m pytest -q -m cuda tests/cuda
	$(GPY) -m benchmarks learner --device cuda --no-prioritized --seconds 1 --repeats 2 --section learner_cuda
	$(GPY) -m benchmarks devices --quick --update-benchmarks True --section devices_cuda --figure figures/bench_devices_cuda.png
	$(GPY) -m benchmarks pixels --parts pong --pong-systems pararl-ppo pararl-ppo-async sb3-ppo pararl-dqn sb3-dqn --slice-s 20 --update-benchmarks True --section pong_cuda
	$(GPY) -m benchmarks seeds --cases breakout-ppo --agents 32 --budget 100000 --ways batched --learn-device cuda --update-benchmarks True --section seeds_cuda

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
