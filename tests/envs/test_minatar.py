"""MinAtar games by name: bool channels-last planes, sticky actions 0.1, reproducible
from pararl's 64-bit seeds, frames drawn for videos, and a one-line error naming what
to install when the package is missing; registered once, without Gymnasium's warning."""

from __future__ import annotations

import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest

from pararl.envs.make import check_env_id, make_env
from pararl.envs.minatar import CELL, IDS, STICKY_ACTIONS, register_minatar
from pararl.errors import UsageError

pytest.importorskip("minatar", reason="the [minatar] extra is not installed")

GAMES = {"Breakout": 4, "SpaceInvaders": 6, "Asterix": 4, "Seaquest": 10, "Freeway": 7}


@pytest.mark.parametrize(("game", "channels"), GAMES.items())
def test_games_resolve_with_bool_channels_last_planes(game: str, channels: int) -> None:
    env_id = f"MinAtar/{game}-v1"
    check_env_id(env_id)
    env = make_env(env_id, training=True)
    obs, _ = env.reset(seed=2**40 + 7)  # pararl's seeds are 64-bit; MinAtar's are 32
    assert obs.shape == env.observation_space.shape == (10, 10, channels)
    assert obs.dtype == np.bool_
    assert env.unwrapped.game.sticky_action_prob == STICKY_ACTIONS  # type: ignore[attr-defined]
    env.close()


def rollout(seed: int, steps: int = 300) -> tuple[np.ndarray, list[float]]:
    env = make_env("MinAtar/Breakout-v1")
    obs, _ = env.reset(seed=seed)
    frames, rewards = [obs], []
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, reward, term, trunc, _ = env.step(int(rng.integers(3)))
        frames.append(obs)
        rewards.append(float(reward))
        if term or trunc:
            obs, _ = env.reset()
    env.close()
    return np.stack(frames), rewards


def test_a_seed_gives_one_game_and_sticky_actions_follow_it() -> None:
    check_env_id("MinAtar/Breakout-v1")
    first, rewards = rollout(3)
    again, same = rollout(3)
    other, _ = rollout(4)
    np.testing.assert_array_equal(first, again)
    assert rewards == same
    assert not np.array_equal(first, other)


def test_frames_for_videos_are_rgb_bytes_of_the_grid() -> None:
    check_env_id("MinAtar/Breakout-v1")
    env = make_env("MinAtar/Breakout-v1", render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    frame = env.render()
    assert isinstance(frame, np.ndarray)
    assert frame.shape == (10 * CELL, 10 * CELL, 3)
    assert frame.dtype == np.uint8
    lit = frame[::CELL, ::CELL].any(axis=-1)  # one pixel per cell
    np.testing.assert_array_equal(lit, obs.any(axis=-1))
    env.close()


def test_without_the_package_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "minatar", None)  # import fails as if not installed
    monkeypatch.setitem(sys.modules, "minatar.gym", None)
    with pytest.raises(UsageError, match=r"pip install 'pararl\[minatar\]'"):
        check_env_id("MinAtar/Breakout-v1")


def test_a_process_given_one_game_registers_the_others_without_a_warning() -> None:
    """The evaluation process is given the run's game's registration before MinAtar
    registers its games (`evaluation.serve.register_carried`): every run of a game
    but Breakout printed Gymnasium's "Overriding environment ... already in registry"."""
    register_minatar()
    saved = {env_id: gym.registry.pop(env_id) for env_id in IDS}
    try:
        carried = saved["MinAtar/SpaceInvaders-v1"]
        gym.registry[carried.id] = carried
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # Gymnasium's warning raises
            assert register_minatar()
        assert all(env_id in gym.registry for env_id in IDS)
        assert gym.registry[carried.id] is carried  # the one given stands
    finally:
        gym.registry.update(saved)
