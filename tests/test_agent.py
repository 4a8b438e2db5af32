"""`pararl.load(run_dir).act(obs)` for every algorithm: one observation or a batch,
PPO's normalisation statistics applied, images, MAML adapted to a task; and
`pararl.evaluate`, the code `pararl evaluate` runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import pararl
from pararl import DQNConfig, MAMLConfig, PPOConfig, SACConfig, load, train
from pararl.cli import main
from pararl.errors import UsageError
from pararl.models import ActorCritic, QNetwork
from pararl.models.gaussian import GaussianMLP
from pararl.models.squashed import SquashedGaussianActor

QUIET: dict[str, Any] = dict(
    progress="none", tensorboard=False, mode="serial", workers=1, eval_in="inline"
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny run of each kind (trained once for the module)."""
    root = tmp_path_factory.mktemp("agents")
    configs = {
        "dqn": DQNConfig(
            total_steps=600, learning_starts=100, eval_every=300, eval_episodes=2,
            hidden=(16,), **QUIET,
        ),
        "ppo": PPOConfig(
            total_steps=512, num_steps=64, eval_every=512, eval_episodes=2, hidden=(16,),
            eval_actions="sampled", **QUIET,
        ),
        # continuous actions: observation normalisation on by default
        "pendulum": PPOConfig(
            env="Pendulum-v1", total_steps=1024, num_steps=128, eval_every=1024,
            eval_episodes=1, hidden=(16,), **QUIET,
        ),
        "sac": SACConfig(
            env="Pendulum-v1", total_steps=300, learning_starts=100, eval_every=300,
            eval_episodes=1, batch_size=16, hidden=(16, 16), **QUIET,
        ),
        "minatar": DQNConfig(
            env="MinAtar/Breakout-v1", total_steps=300, learning_starts=100, eval_every=300,
            eval_episodes=1, eval_max_steps=200, batch_size=8, **QUIET,
        ),
    }  # fmt: skip
    for name, config in configs.items():
        if name == "minatar":
            pytest.importorskip("minatar")
        config.run_dir = root / name
        train(config)
    return {name: root / name for name in configs}


def test_dqn_acts_on_one_observation_or_a_batch(runs: dict[str, Path]) -> None:
    agent = load(runs["dqn"])
    assert agent.env_id == "CartPole-v1"
    assert isinstance(agent.config, DQNConfig)
    assert isinstance(agent.network, QNetwork)
    env = agent.make_env()
    obs, _ = env.reset(seed=0)
    action = agent.act(obs)
    assert isinstance(action, int)
    obs_batch = np.stack([obs, -obs, obs * 2])
    actions = agent.act(obs_batch)
    assert actions.shape == (3,)
    with torch.no_grad():
        expected = agent.network(torch.as_tensor(obs_batch)).argmax(1).numpy()
    np.testing.assert_array_equal(actions, expected)
    assert actions[0] == action
    assert env.step(action)[0].shape == (4,)
    # epsilon-greedy at the run's final epsilon: mostly, not always, the greedy action
    explored = agent.act(np.repeat(obs_batch[:1], 2000, 0), deterministic=False)
    assert 0.9 < (explored == action).mean() < 1.0


def test_ppo_discrete_and_continuous_with_normalisation(runs: dict[str, Path]) -> None:
    discrete = load(runs["ppo"], "final")
    assert isinstance(discrete.network, ActorCritic)
    obs, _ = discrete.make_env().reset(seed=1)
    assert discrete.act(obs) in (0, 1)

    agent = load(runs["pendulum"])
    net = agent.network
    assert isinstance(net, ActorCritic)
    assert net.norm.settings.obs
    assert float(net.norm.obs_count) > 0  # statistics from the run, not the identity
    obs = np.array([[0.3, -0.9, 4.0], [1.0, 0.0, -7.5]], np.float32)
    actions = agent.act(obs)
    assert actions.shape == (2, 1)
    with torch.no_grad():
        x = torch.as_tensor(obs)
        normalised = ((x - net.norm.obs_shift) * net.norm.obs_scale).clamp(-10, 10)
        mean = net.actor(net.body(normalised)).numpy()
        raw = net.actor(net.body(x)).numpy()
    np.testing.assert_allclose(actions, np.clip(mean, -2.0, 2.0), rtol=1e-6)  # Pendulum's bounds
    assert not np.allclose(np.clip(raw, -2.0, 2.0), actions)  # normalisation matters here
    single = agent.act(obs[0])
    assert single.shape == (1,)
    np.testing.assert_allclose(single, actions[0], rtol=1e-5)  # a batch of 1 rounds apart
    sampled = agent.act(np.repeat(obs[:1], 500, 0), deterministic=False)
    assert sampled.std() > 0.1  # drawn from the Gaussian, clipped to the bounds
    assert sampled.min() >= -2.0
    assert sampled.max() <= 2.0


def test_sac_acts_within_the_bounds(runs: dict[str, Path]) -> None:
    agent = load(runs["sac"])
    net = agent.network
    assert isinstance(net, SquashedGaussianActor)
    obs = np.array([[0.3, -0.9, 4.0], [1.0, 0.0, -7.5]], np.float32)
    actions = agent.act(obs)
    assert actions.shape == (2, 1)
    with torch.no_grad():
        mean, _ = net(torch.as_tensor(obs))
    np.testing.assert_allclose(actions, 2.0 * np.tanh(mean.numpy()), rtol=1e-5)  # the bounds ±2
    assert agent.act(obs[0]).shape == (1,)
    sampled = agent.act(np.repeat(obs[:1], 500, 0), deterministic=False)
    assert sampled.std() > 0.01
    assert -2.0 <= sampled.min() <= sampled.max() <= 2.0


def test_images_act_as_they_come(runs: dict[str, Path]) -> None:
    agent = load(runs["minatar"])
    env = agent.make_env()
    obs, _ = env.reset(seed=0)
    assert obs.shape == agent.obs_shape == (10, 10, 4)
    action = agent.act(obs)
    assert 0 <= action < env.action_space.n  # type: ignore[attr-defined]
    assert agent.act(np.stack([obs, obs])).shape == (2,)


def test_maml_acts_with_the_meta_policy_or_adapted_to_a_task(tmp_path: Path) -> None:
    run = tmp_path / "maml"
    train(
        MAMLConfig(
            env="pararl/Navigation2D-v0", meta_iterations=1, meta_batch_size=2,
            fast_batch_size=4, episode_length=20, workers=1, run_dir=run,
            progress="none", tensorboard=False,
        )
    )  # fmt: skip
    agent = load(run)
    assert isinstance(agent.network, GaussianMLP)
    env = agent.make_env()
    task = env.unwrapped.sample_tasks(1)[0]  # type: ignore[attr-defined]
    adapted = agent.adapt(task, episodes=4)
    assert adapted.task is task
    assert adapted.adaptation_returns is not None
    assert adapted.adaptation_returns.shape == (2,)  # before, after one step
    obs, _ = env.reset(seed=0)
    assert agent.act(obs).shape == adapted.act(obs).shape == (2,)
    assert not np.allclose(agent.act(obs), adapted.act(obs))  # the task's own parameters
    assert not np.allclose(agent.act(obs), agent.act(obs, deterministic=False))


def test_bad_input_is_one_line(runs: dict[str, Path]) -> None:
    agent = load(runs["dqn"])
    with pytest.raises(UsageError, match=r"shape \(3,\): this agent takes \(4,\)"):
        agent.act(np.zeros(3))
    with pytest.raises(UsageError, match="no checkpoint 'nope'; it has best, final, step_"):
        load(runs["dqn"], "nope")
    with pytest.raises(UsageError, match=r"no config\.json"):
        load(runs["dqn"] / "checkpoints")
    with pytest.raises(UsageError, match=r"adapt\(\) is for MAML runs"):
        agent.adapt(None)


def test_evaluate_from_python_is_the_command_line(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    result = pararl.evaluate(runs["dqn"], episodes=3)
    printed = capsys.readouterr().out
    assert set(result) == {"mean", "std", "episodes", "truncated"}
    assert result["episodes"] == 3
    assert f"mean return {result['mean']:.1f} ± {result['std']:.1f} over 3 episodes" in printed
    assert main(["evaluate", str(runs["dqn"]), "--episodes", "3"]) == 0
    assert capsys.readouterr().out == printed


def test_evaluate_acts_as_the_runs_evaluations_did_or_as_asked(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A run trained with `--eval-actions sampled` is evaluated that way (the same
    draws each time, from the evaluation seed), unless asked for greedy actions."""
    assert '"eval_actions": "sampled"' in (runs["ppo"] / "config.json").read_text()
    assert (runs["ppo"] / "eval.csv").read_text().count("\n") >= 2  # evaluated in training
    sampled = pararl.evaluate(runs["ppo"], episodes=4)
    assert "over 4 episodes, actions sampled" in capsys.readouterr().out
    assert pararl.evaluate(runs["ppo"], episodes=4) == sampled
    greedy = pararl.evaluate(runs["ppo"], episodes=4, actions="greedy")
    out = capsys.readouterr().out
    assert "actions sampled" not in out.splitlines()[-1]
    assert greedy != sampled
    assert main(["evaluate", str(runs["pendulum"]), "--episodes", "2", "--actions", "sampled"]) == 0
    assert "actions sampled" in capsys.readouterr().out
