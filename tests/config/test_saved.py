"""A run's config.json, both ways: what earlier versions of pararl wrote still reads
back (resume and evaluate start from it), and `for_env` fills a config's defaults
once, into a `Filled` the learners take."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pararl.config import (
    DQNConfig,
    MAMLConfig,
    PPOConfig,
    SACConfig,
    config_from_json,
    saved_config,
    to_json,
)
from pararl.errors import UsageError
from pararl.registry import ALGORITHMS, algorithm_of_run

# config.json as an earlier version wrote it for a DQN run: the class name, every
# field, and the facts resolved at start-up (not fields: ignored on reading)
EARLIER = {
    "algo": "DQNConfig",
    "env": "CartPole-v1",
    "seed": 3,
    "total_steps": 5000,
    "run_dir": "runs/x",
    "resume": None,
    "hidden": [64, 64],
    "lr": 0.0025,
    "mode": "async",
    "replay_ratio": 0.25,
    "resolved": {"mode": "async", "env_kind": "discrete"},
}


def test_an_earlier_config_json_reads_back(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(EARLIER))
    config = saved_config(tmp_path)
    assert isinstance(config, DQNConfig)
    assert (config.seed, config.total_steps, config.lr, config.mode) == (3, 5000, 0.0025, "async")
    assert config.hidden == (64, 64)  # JSON's list back to the field's tuple
    assert config.run_dir == Path("runs/x")
    assert algorithm_of_run(tmp_path).name == "dqn"


@pytest.mark.parametrize("cls", [DQNConfig, SACConfig, PPOConfig, MAMLConfig])
def test_every_algorithm_round_trips(cls: type) -> None:
    config = cls(seed=7, run_dir=Path("runs/y"))
    assert config_from_json(to_json(config, {"resolved": {"x": 1}})) == config
    assert any(a.config is cls for a in ALGORITHMS.values())


def test_a_ppo_config_with_a_removed_option_reads_back(tmp_path: Path) -> None:
    saved = {"algo": "PPOConfig", "env": "CartPole-v1", "seed": 5}
    saved |= {"double_buffer": True, "manual_grad": False}  # options since removed
    (tmp_path / "config.json").write_text(json.dumps(saved))
    config = saved_config(tmp_path)
    assert config == PPOConfig(env="CartPole-v1", seed=5)


def test_a_directory_without_a_known_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no config\.json there"):
        saved_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"algo": "NoSuchConfig"}))
    with pytest.raises(UsageError, match="no known algorithm"):
        saved_config(tmp_path)


def test_for_env_fills_the_kinds_defaults_once() -> None:
    filled = DQNConfig(lr=0.5).for_env("minatar")
    assert filled.kind == "minatar"
    assert filled.config.lr == 0.5  # given: kept
    assert filled.config.optimizer == filled.defaults["optimizer"] == "rmsprop"
    assert "lr" not in filled.defaults
    assert filled.config.for_env("minatar").defaults == {}  # nothing left to fill
    assert filled.config.settings.batch_size == 32
    maml = MAMLConfig(env="pararl/Navigation2D-v0", meta_iterations=2).for_env("continuous")
    assert maml.defaults["meta_batch_size"] == 20
    assert maml.config.total_steps == 2 * maml.config.steps_per_iteration()


def test_an_env_with_its_own_defaults_takes_them_over_its_kinds() -> None:
    """SAC on Pendulum-v1 (by its id, or `module:Pendulum-v1`): rl-zoo's row for it
    first, the kind's for the rest; a given value wins over both; another env of the
    same kind gets the kind's."""
    for env in ("Pendulum-v1", "gymnasium.envs.classic_control:Pendulum-v1"):
        filled = SACConfig(env=env, learning_starts=500).for_env("continuous")
        assert filled.tuned_for == "Pendulum-v1"
        assert (filled.config.lr, filled.config.total_steps) == (1e-3, 20_000)
        assert filled.config.learning_starts == 500  # given
        assert filled.config.batch_size == 256  # the kind's
    mujoco = SACConfig(env="HalfCheetah-v5").for_env("continuous")
    assert mujoco.tuned_for is None
    assert (mujoco.config.lr, mujoco.config.learning_starts) == (3e-4, 10_000)
    given = SACConfig(env="Pendulum-v1", lr=3e-4, total_steps=10, learning_starts=1,
                      eval_every=1, checkpoint_every=1).for_env("continuous")  # fmt: skip
    assert given.tuned_for is None  # nothing of its row was used
