"""`python -m benchmarks dictobs`: the quick path end to end (pararl's PPO with its
multi-input encoder and SB3's PPO with MultiInputPolicy on CartPole's state as a Dict,
a tiny budget), one row of the comparison harness; the env both run, and the same
network shape on both sides."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from benchmarks import learning
from benchmarks.lib import compare, dict_cartpole, sb3

pytest.importorskip("stable_baselines3")


@pytest.mark.slow
def test_quick_runs_both_systems(bench: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    data = bench("dictobs", "--quick", "--budget", "512", "--eval-every", "512", figure=False)
    runs = data["results"]["runs"]
    assert [r["system"] for r in runs] == ["pararl", "sb3"]
    for run in runs:
        assert run["ok"], run["note"]
        assert run["env_steps"] >= 512
        assert run["curve"], "no evaluation"
    for run in runs:  # two rollouts of 8 x 32, each 20 epochs of one minibatch
        assert run["updates"] == 2 * 20, run["system"]
    assert "DictCartPole pararl PPO (multi-input): final" in data["key_ratios"]


def test_both_systems_see_cartpoles_state_as_two_keys() -> None:
    env = gym.make(dict_cartpole.ENV)
    inner = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=3)
    state, _ = inner.reset(seed=3)
    assert isinstance(env.observation_space, gym.spaces.Dict)
    assert sorted(obs) == ["cart", "pole"]
    np.testing.assert_array_equal(np.concatenate([obs["cart"], obs["pole"]]), state)
    assert env.observation_space.contains(obs)
    assert compare.family(dict_cartpole.ENV) == "DictCartPole"


def test_both_systems_build_the_same_network() -> None:
    """SB3's MultiInputPolicy and pararl's multi-input actor-critic on the env: 4
    features (the keys flattened, no weights of their own), then separate 64x64 tanh
    MLPs for the actor and the critic: as many parameters, layer by layer."""
    import torch
    from stable_baselines3 import PPO

    from pararl.config import PPOConfig
    from pararl.models.build import actor_critic
    from pararl.observations import encoded
    from pararl.runners.ppo_state import rollout_dtype

    anchor = sb3.ANCHORS["multi-input"]
    envs, _ = sb3.make_envs(anchor, "ppo", dict_cartpole.ENV, 0)
    theirs = PPO(anchor.policy, envs, device="cpu", **anchor.settings("ppo", envs, 50_000))
    env = gym.make(dict_cartpole.ENV)
    flags = learning.dictobs_flags()
    config = PPOConfig(env="x", hidden=flags["hidden"], shared_body=flags["shared_body"])  # type: ignore[arg-type]
    mine = actor_critic(
        str(flags["model"]),  # type: ignore[arg-type]
        (),
        rollout_dtype(env.observation_space),
        2,
        True,
        config.hidden,
        config.shared_body,
        leaves=encoded(env.observation_space),
    )
    assert theirs.policy.features_extractor.features_dim == mine.obs_dim == 4

    def shapes(module: torch.nn.Module) -> list[tuple[int, ...]]:
        return sorted(tuple(p.shape) for p in module.parameters() if p.requires_grad)

    assert shapes(theirs.policy) == shapes(mine)
    assert isinstance(theirs.policy.mlp_extractor.policy_net[1], torch.nn.Tanh)
