"""Observation and reward normalisation: the statistics depend on the data only (not
on worker count, partial receives or segment order), survive save and resume bit
for bit, are frozen in evaluation, and continuous actions are clipped for the env
only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pararl import PPOConfig, checkpoint, train
from pararl.algos.ppo import load_policy
from pararl.config import config_from_json, to_json
from pararl.models.normalize import DiscountedReturns, Normalizer, NormSettings, merge_moments
from pararl.runners.ppo_state import PPOState

SMALL: dict[str, Any] = dict(
    env="Pendulum-v1",
    num_steps=32,
    minibatch_size=64,
    update_epochs=2,
    eval_every=10_000,
    eval_episodes=2,
    tensorboard=False,
    progress="none",
    hidden=(16,),
    workers=2,
    envs_per_worker=2,
    target_return=10_000.0,
    eval_in="inline",  # no evaluation child to start: these tests do not check it
)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 50), min_size=1, max_size=6),
    seed=st.integers(0, 2**31),
)
def test_merged_moments_are_the_moments_of_all_data(sizes: list[int], seed: int) -> None:
    data = np.random.default_rng(seed).normal(3.0, 2.0, size=(sum(sizes), 3))
    count, mean, var = 0.0, np.zeros(3), np.ones(3)
    for chunk in np.split(data, np.cumsum(sizes)[:-1]):
        count, mean, var = merge_moments(count, mean, var, chunk)
    assert count == len(data)
    np.testing.assert_allclose(mean, data.mean(0), rtol=1e-10)
    np.testing.assert_allclose(var, data.var(0), rtol=1e-10)


def test_statistics_do_not_depend_on_segment_order() -> None:
    """Ray concatenates segments actor by actor; local rollouts are time-major. The
    same data in either order gives the same statistics."""
    rng = np.random.default_rng(0)
    obs, disc = rng.normal(size=(64, 5)), rng.normal(size=64)
    order = rng.permutation(64)
    a, b = (Normalizer(5, NormSettings(obs=True, reward=True)) for _ in range(2))
    a.update(obs, disc)
    b.update(obs[order], disc[order])
    for key, value in a.state_dict().items():
        torch.testing.assert_close(value, b.state_dict()[key], rtol=1e-12, atol=0)


def test_discounted_returns_by_groups_equal_all_at_once() -> None:
    """Partial receives step the envs group by group."""
    rng = np.random.default_rng(1)
    rewards, ended = rng.normal(size=(20, 6)), rng.random((20, 6)) < 0.1
    whole, halves = DiscountedReturns(6, 0.9), DiscountedReturns(6, 0.9)
    groups = (np.arange(3), np.arange(3, 6))
    for t in range(20):
        expected = whole.step(np.arange(6), rewards[t], ended[t])
        got = np.concatenate([halves.step(g, rewards[t, g], ended[t, g]) for g in groups])
        np.testing.assert_array_equal(got, expected)


def test_serial_and_workers_learn_the_same_statistics(tmp_path: Path) -> None:
    finals = []
    for mode in ("serial", "sync"):
        session = train(PPOConfig(mode=mode, total_steps=256, run_dir=tmp_path / mode, **SMALL))
        finals.append(checkpoint.load(session.run.checkpoint("final")))
    a, b = (f["learner"]["model"] for f in finals)
    assert float(a["norm.obs_count"]) == 256
    norm_keys = [k for k in a if k.startswith("norm.")]
    assert all(torch.equal(a[k], b[k]) for k in norm_keys), norm_keys


def test_statistics_survive_save_and_resume_bit_for_bit(tmp_path: Path) -> None:
    run = tmp_path / "run"
    session = train(PPOConfig(mode="serial", total_steps=256, run_dir=run, **SMALL))
    saved = checkpoint.load(session.run.checkpoint("final"))
    config = config_from_json((run / "config.json").read_text())
    env = gym.make("Pendulum-v1")
    spaces = env.observation_space, env.action_space
    state = PPOState(config.for_spaces(*spaces), *spaces, 4, saved)
    restored = state.learner.model.state_dict()
    for key, value in saved["learner"]["model"].items():
        assert torch.equal(restored[key], value), key
    assert float(restored["norm.reward_scale"]) != 1.0  # the statistics were in use


def test_evaluation_applies_frozen_statistics(tmp_path: Path) -> None:
    run = tmp_path / "run"
    session = train(PPOConfig(mode="serial", total_steps=256, run_dir=run, **SMALL))
    saved = checkpoint.load(session.run.checkpoint("final"))
    config = config_from_json((run / "config.json").read_text())
    policy = load_policy(config, saved)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    obs = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
    actions = policy.greedy(obs)
    for key, value in policy.state_dict().items():
        assert torch.equal(value, before[key]), key  # acting never updates statistics
    norm = policy.norm
    manual = np.clip((obs - norm.obs_mean.numpy()) / np.sqrt(norm.obs_var.numpy() + 1e-8), -10, 10)
    with torch.no_grad():
        mean = policy.actor(torch.as_tensor(manual, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(actions, mean, rtol=1e-4, atol=1e-5)


class ActionLog(gym.Env):  # type: ignore[type-arg]
    """A Box-action env that logs the actions it is given."""

    seen: ClassVar[list[np.ndarray]] = []
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,))
    action_space = gym.spaces.Box(-1.0, 1.0, (1,))

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> Any:
        ActionLog.seen.append(np.asarray(action))
        return np.zeros(2, np.float32), 0.0, False, False, {}


def test_box_actions_are_clipped_for_the_env_only() -> None:
    from pararl.envs.make import env_factory
    from pararl.samplers.rollout.collect import EnvStream, collect
    from pararl.vector import SerialVectorEnv

    gym.register("pararl-test/ActionLog-v0", entry_point=ActionLog)
    envs = SerialVectorEnv([env_factory("pararl-test/ActionLog-v0")] * 2, autoreset_mode="SameStep")
    space = ActionLog.observation_space
    filled = PPOConfig(num_steps=64).for_spaces(space, ActionLog.action_space)
    state = PPOState(filled, space, ActionLog.action_space, 2)
    with torch.no_grad():
        state.actor.log_std.fill_(1.0)  # std 2.7 on a [-1, 1] space: most samples outside
    stream = EnvStream.start(envs.reset(seed=0)[0], 0.99)
    batch = collect(state.actor, state.rollout_spec, envs, stream, lambda _: None)
    envs.close()
    assert np.abs(np.stack(ActionLog.seen)).max() <= 1.0
    assert np.abs(batch["actions"]).max() > 1.0  # the sample itself is what is learned from


def test_defaults_follow_the_kind_of_env(tmp_path: Path, pararl: Any) -> None:
    result = pararl(
        "train", "ppo", "--env", "Pendulum-v1", "--total-steps", "64", "--num-steps", "16",
        "--lr", "0.001", "--eval-every", "64", "--eval-episodes", "1", "--workers", "1",
        "--run-dir", str(tmp_path / "p"), "--progress", "plain",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    saved = config_from_json((tmp_path / "p" / "config.json").read_text())
    assert isinstance(saved, PPOConfig)
    assert saved.lr == 0.001
    assert saved.num_steps == 16
    assert saved.gamma == 0.99
    assert saved.norm_obs
    assert saved.norm_reward
    assert "defaults for continuous actions" in result.stderr
    filled = PPOConfig(env="CartPole-v1").for_env("discrete")
    cartpole = filled.config
    assert cartpole.gamma == 0.98
    assert not cartpole.norm_obs
    assert "gamma" in filled.defaults
    assert '"norm_obs": false' in to_json(cartpole)


def test_unfilled_config_says_what_to_do() -> None:
    from pararl.errors import UsageError

    with pytest.raises(UsageError, match="for_env"):
        _ = PPOConfig().settings
