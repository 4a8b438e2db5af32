"""Building envs as `gym.make` does: `render_mode` only when asked for, the user's
keyword arguments passed on, bad ones refused in one line, MuJoCo's known noise
silenced and its other warnings kept."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from pararl.envs.make import env_factory, make_env, probe_env
from pararl.errors import UsageError
from tests.conftest import UserModule


def test_an_env_without_render_mode_builds_and_kwargs_reach_it(user_module: UserModule) -> None:
    env = make_env(user_module.env_id, kwargs={"length": 7})
    try:
        assert env.unwrapped.length == 7  # type: ignore[attr-defined]
    finally:
        env.close()
    observation_space, action_space = probe_env(user_module.env_id, kwargs={"length": 2})
    assert observation_space.shape == (1,)
    assert action_space.n == 2  # type: ignore[attr-defined]


def test_render_mode_is_passed_only_when_asked_for() -> None:
    assert make_env("CartPole-v1").unwrapped.render_mode is None
    assert make_env("CartPole-v1", render_mode="rgb_array").unwrapped.render_mode == "rgb_array"
    env = env_factory("CartPole-v1", kwargs={"sutton_barto_reward": True})()
    assert env.unwrapped._sutton_barto_reward is True  # type: ignore[attr-defined]


def test_keyword_arguments_the_env_does_not_take_are_one_line(user_module: UserModule) -> None:
    with pytest.raises(UsageError, match="--env-kwargs") as raised:
        probe_env(user_module.env_id, kwargs={"width": 3})
    assert "width" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_mujoco_settotalmass_warning_is_dropped_and_others_kept(
    capfd: pytest.CaptureFixture[str],
) -> None:
    mujoco = pytest.importorskip("mujoco")
    capfd.readouterr()
    make_env("HalfCheetah-v5").close()  # its XML uses the deprecated attribute
    assert "settotalmass" not in capfd.readouterr().err
    mujoco.get_mju_user_warning()("something else went wrong")
    assert capfd.readouterr().err == "WARNING: something else went wrong\n\n"


def test_box_actions_are_clipped_to_bounds_the_space_still_states() -> None:
    """A Gaussian policy's action beyond Pendulum's torque limit of 2 reaches the env
    as 2; the env's action space keeps its bounds (random actions sampled from it are
    the env's own), as the spaces pararl probes do."""
    env = make_env("Pendulum-v1")
    space = env.action_space
    assert isinstance(space, gym.spaces.Box)
    assert (space.low.tolist(), space.high.tolist()) == ([-2.0], [2.0])
    assert probe_env("Pendulum-v1")[1] == space
    env.reset(seed=0)
    env.step(np.array([50.0], np.float32))
    assert env.unwrapped.last_u == 2.0  # type: ignore[attr-defined]
    env.close()
    assert env.spec is not None
    again = gym.make(env.spec)  # the spec rebuilds it, wrapper included
    assert again.action_space == space
    again.close()
