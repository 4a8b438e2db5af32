"""The table of algorithms is the spec modules of `pararl.registry`, and every
algorithm works from its spec alone: `pararl train NAME` on the command line, its
saved config read back by class name, `pararl.load(run).act()` greedy and sampled
within the env's action space, `pararl evaluate`; listing the commands imports no
torch."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import pararl as package
import pararl.registry
from pararl import checkpoint, load
from pararl.config import RunConfig, configs, saved_config
from pararl.errors import UsageError
from pararl.registry import ALGORITHMS, Algorithm, algorithm_of
from tests.test_checkpoint import assert_same

# short evaluations; and what an algorithm's defaults would make too long for a test
# (MAML's default is 40 HalfCheetah tasks of 20 episodes an iteration; its
# evaluations are its own returns after adaptation)
EVALUATIONS = ["--eval-episodes", "1", "--eval-in", "inline"]
SMALLER: dict[str, list[str]] = {
    "maml": [
        "--env", "pararl/Navigation2D-v0", "--meta-batch-size", "2", "--fast-batch-size", "2",
        "--episode-length", "10", "--meta-iterations", "1",
    ],
}  # fmt: skip


def test_the_table_is_the_spec_modules() -> None:
    modules = [m.name for m in pkgutil.iter_modules(pararl.registry.__path__)]
    specs = {
        m: spec
        for m in modules
        if isinstance(
            spec := getattr(importlib.import_module(f"pararl.registry.{m}"), "SPEC", None),
            Algorithm,
        )
    }
    assert set(specs) == set(ALGORITHMS) >= {"dqn", "sac", "td3", "ppo", "maml"}
    for name, spec in ALGORITHMS.items():
        assert specs[name] is spec
        assert spec.name == name
        assert configs()[spec.config.__name__] is spec.config  # config.json's name for it
        assert algorithm_of(spec.config()) is spec
        assert getattr(package, spec.config.__name__) is spec.config  # `pararl.TD3Config`
    with pytest.raises(UsageError, match="no algorithm trains a RunConfig"):
        algorithm_of(RunConfig())
    assert [n for n, row in ALGORITHMS.items() if row.evaluation is not None] == ["maml"]
    assert [n for n, row in ALGORITHMS.items() if row.adapt is not None] == ["maml"]


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_each_algorithm_trains_saves_loads_and_acts_from_its_spec(
    name: str, tmp_path: Path, pararl: Any
) -> None:
    run = tmp_path / name
    done = pararl(
        "train", name, "--total-steps", "150", "--workers", "1", "--progress", "none",
        "--no-tensorboard", "--run-dir", str(run), *SMALLER.get(name, EVALUATIONS),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    spec = ALGORITHMS[name]
    assert json.loads((run / "config.json").read_text())["algo"] == spec.config.__name__
    assert type(saved_config(run)) is spec.config
    agent = load(run, "final")
    assert agent.algorithm is spec
    env = agent.make_env()
    try:
        obs, _ = env.reset(seed=0)
        greedy = agent.act(obs)
        assert env.action_space.contains(np.asarray(greedy, env.action_space.dtype))
        assert np.array_equal(greedy, agent.act(obs))  # greedy is deterministic
        batch = np.stack([obs] * 64)
        sampled = agent.act(batch, deterministic=False)
        assert len(sampled) == 64
        assert all(
            env.action_space.contains(np.asarray(a, env.action_space.dtype)) for a in sampled
        )
    finally:
        env.close()
    evaluated = pararl("evaluate", str(run), "--episodes", "1", "--checkpoint", "final")
    assert evaluated.returncode == 0, evaluated.stderr
    # every checkpoint is weights-only, and goes through the format bit for bit
    for path in (run / "checkpoints").glob("*.pt"):
        torch.load(path, weights_only=True)
        state = checkpoint.load(path)
        checkpoint.save(tmp_path / "again.pt", state)
        assert_same(checkpoint.load(tmp_path / "again.pt"), state, path.name)


def test_listing_the_commands_imports_no_torch() -> None:
    code = (
        "import sys; from pararl.cli import main; main(['--help']); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
    assert "pararl train td3" in out.stdout
