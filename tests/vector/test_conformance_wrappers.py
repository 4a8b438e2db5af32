"""Gymnasium's vector wrappers over `ParallelVectorEnv` behave as over
`AsyncVectorEnv`: the same outputs over 20 steps with fixed seeds and actions
(harness and `CONFORMANCE_SELF_CHECK=1` knob: tests/vector/conformance.py)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import VectorEnv
from gymnasium.wrappers import vector as wrappers

from tests.vector.conformance import MakeVec, run_both
from tests.vector.conformance_envs import batched_actions
from tests.vector.conftest import space_env_fn

pytestmark = pytest.mark.timeout(60)

STEPS = 20
N_ENVS = 3


def _stats(env: Any) -> dict[str, Any]:
    return {
        "returns": list(env.return_queue),
        "lengths": list(env.length_queue),
        "count": env.episode_count,
    }


def _obs_rms(env: Any) -> dict[str, Any]:
    rms = env.obs_rms
    return {"mean": rms.mean, "var": rms.var, "count": rms.count}


def _return_rms(env: Any) -> dict[str, Any]:
    rms = env.return_rms
    return {"mean": rms.mean, "var": rms.var, "count": rms.count}


Wrap = Callable[[VectorEnv], VectorEnv]

# name: (wrap, action scale (ClipAction gets out-of-bounds actions), final state)
WRAPPERS: dict[str, tuple[Wrap, float, Callable[[VectorEnv], Any] | None]] = {
    "record_episode_statistics": (wrappers.RecordEpisodeStatistics, 1.0, _stats),
    "normalize_observation": (wrappers.NormalizeObservation, 1.0, _obs_rms),
    "normalize_reward": (wrappers.NormalizeReward, 1.0, _return_rms),
    "clip_action": (wrappers.ClipAction, 3.0, None),
    "transform_observation": (
        functools.partial(wrappers.TransformObservation, func=np.tanh),
        1.0,
        None,
    ),
}


def _without_clock(infos: dict[str, Any]) -> dict[str, Any]:
    """Infos minus the wall-clock `episode["t"]` of RecordEpisodeStatistics (its
    mask and dtype stay)."""
    if "episode" not in infos:
        return infos
    episode = dict(infos["episode"])
    episode["t"] = (episode["t"].dtype, episode["t"] != 0)
    return {**infos, "episode": episode}


@pytest.mark.parametrize("name", list(WRAPPERS))
def test_vector_wrapper(name: str) -> None:
    """The wrapped env's observations, rewards, ends and infos, and the wrapper's
    running statistics, are those it computes over AsyncVectorEnv."""
    wrap, scale, state = WRAPPERS[name]

    def scenario(make: MakeVec) -> Any:
        env = wrap(make([space_env_fn("box", 5, 0.1) for _ in range(N_ENVS)]))
        obs, infos = env.reset(seed=21)
        record: list[Any] = [obs, _without_clock(infos)]
        for actions in batched_actions("box", N_ENVS, STEPS, seed=8):
            obs, rew, term, trunc, infos = env.step(actions * np.float32(scale))
            record.append((obs, rew, term, trunc, _without_clock(infos)))
        if state is not None:
            record.append(state(env))
        env.close()
        return record

    run_both(scenario)
