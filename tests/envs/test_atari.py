"""Atari games by name: frames equal Gymnasium's `AtariPreprocessing` +
`FrameStackObservation` (configured alike) step for step, in every backend and
autoreset mode; a lost life ends a training episode while the game plays on;
rewards are clipped for training only; ids of every naming scheme resolve."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from pararl.envs.atari import AtariOptions, make_atari
from pararl.envs.make import check_env_id, make_env
from pararl.vector import ParallelVectorEnv, SerialVectorEnv

ale_py = pytest.importorskip("ale_py", reason="the [atari] extra is not installed")
pytestmark = pytest.mark.timeout(120)

# As the reference preprocesses: no FIRE at reset (Gymnasium has no such wrapper).
PLAIN = AtariOptions(fire_reset=False)


def reference(env_id: str) -> gym.Env[Any, Any]:
    gym.register_envs(ale_py)
    env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
    return gym.wrappers.FrameStackObservation(env, 4)


def rollout(vec: gym.vector.VectorEnv, steps: int) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = [vec.reset(seed=7)[0]]
    rng = np.random.default_rng(0)
    n = vec.num_envs
    try:
        for _ in range(steps):
            obs, reward, term, trunc, infos = vec.step(rng.integers(0, 4, n))
            out.append((obs, reward, term, trunc, infos["lives"], infos.get("final_obs")))
    finally:
        vec.close()
    return out


STEPS = 200  # the reference's first game ends at step 163 (seed 7): resets are compared too


@pytest.fixture(scope="module")
def references() -> dict[AutoresetMode, list[tuple[Any, ...]]]:
    """The reference rollout in each autoreset mode, made once for both backends."""
    return {}


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("backend", ["serial", "parallel"])
def test_frames_equal_gymnasiums_preprocessing(
    backend: str, mode: AutoresetMode, references: dict[AutoresetMode, list[tuple[Any, ...]]]
) -> None:
    env_id = "ALE/Breakout-v5"
    mine = functools.partial(make_atari, env_id, PLAIN)
    if mode not in references:
        fns = [functools.partial(reference, env_id)] * 3
        references[mode] = rollout(SyncVectorEnv(fns, autoreset_mode=mode), STEPS)
    want = references[mode]
    if backend == "serial":
        vec: gym.vector.VectorEnv = SerialVectorEnv([mine] * 3, autoreset_mode=mode)
    else:
        vec = ParallelVectorEnv([mine] * 3, num_workers=2, autoreset_mode=mode)
    got = rollout(vec, STEPS)
    assert got[0].dtype == np.uint8
    assert got[0].shape == (3, 4, 84, 84)
    ended = finals = 0
    for g, w in zip(got[1:], want[1:], strict=True):
        for a, b in zip(g[:5], w[:5], strict=True):
            np.testing.assert_array_equal(a, b)
        ended += int(np.any(w[2] | w[3]))
        if w[5] is not None:  # SAME_STEP: the final frames of ended games
            finals += 1
            for a, b in zip(g[5], w[5], strict=True):
                assert (a is None) == (b is None)
                if b is not None:
                    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[0], want[0])
    assert ended > 0  # games did end in the rollout (and were reset)
    assert mode is AutoresetMode.NEXT_STEP or finals > 0


def test_a_lost_life_ends_a_training_episode_and_the_game_plays_on() -> None:
    env = make_env("ALE/Breakout-v5", training=True)
    env.reset(seed=0)
    lives_at_ends, scores, rewards = [], [], set()
    for _ in range(1500):
        _, reward, term, trunc, info = env.step(env.action_space.sample())
        rewards.add(float(reward))
        if term or trunc:
            lives_at_ends.append(env.unwrapped.ale.lives())  # type: ignore[attr-defined]
            if "episode" in info:  # whole games only
                scores.append(float(info["episode"]["r"]))
            env.reset()
            if scores:  # a whole game played: what follows checks it
                break
    env.close()
    assert lives_at_ends[:5] == [4, 3, 2, 1, 0]  # one episode per life, one game
    assert len(scores) >= 1
    assert len(scores) < len(lives_at_ends)
    assert rewards <= {-1.0, 0.0, 1.0}


def test_evaluation_envs_play_whole_games_with_real_rewards() -> None:
    env = make_env("ALE/Breakout-v5")
    env.reset(seed=0)
    ends = 0
    for _ in range(1500):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            assert env.unwrapped.ale.lives() == 0  # type: ignore[attr-defined]
            ends += 1
            break
    env.close()
    assert ends >= 1


@pytest.mark.parametrize("env_id", ["ALE/Pong-v5", "PongNoFrameskip-v4"])
def test_ids_of_both_schemes_resolve_with_the_standard_preprocessing(env_id: str) -> None:
    check_env_id(env_id)
    env = make_env(env_id)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84)
    assert obs.dtype == np.uint8
    assert env.unwrapped._frameskip == 1  # type: ignore[attr-defined]  # skip: the wrapper's
    env.close()
