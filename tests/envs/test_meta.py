"""The meta-RL task envs: reward formulas for a known step, task sampling, bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import pararl.envs  # noqa: F401 - registers the pararl/... ids
from pararl.errors import UsageError

ACTION = np.array([0.5, -0.3, 0.2, 0.9, -0.7, 0.1], np.float32)
CTRL = 0.1 * float(np.sum(np.square(ACTION)))  # HalfCheetah-v5's control cost


def _step(env_id: str, task: dict) -> tuple[float, float]:
    env = gym.make(env_id)
    env.unwrapped.reset_task(task)  # type: ignore[attr-defined]
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(ACTION)
    env.close()
    assert not terminated
    assert not truncated
    return float(reward), float(info["x_velocity"])


def test_half_cheetah_dir_reward_is_direction_times_velocity_minus_control_cost() -> None:
    forward, v = _step("pararl/HalfCheetahDir-v0", {"direction": 1.0})
    backward, v_again = _step("pararl/HalfCheetahDir-v0", {"direction": -1.0})
    assert v == v_again != 0.0  # same seed, same action: the same physics
    assert forward == pytest.approx(v - CTRL, rel=1e-6)
    assert backward == pytest.approx(-v - CTRL, rel=1e-6)


def test_half_cheetah_vel_reward_is_minus_speed_error_minus_control_cost() -> None:
    reward, v = _step("pararl/HalfCheetahVel-v0", {"velocity": 1.5})
    assert reward == pytest.approx(-abs(v - 1.5) - CTRL, rel=1e-6)


def test_half_cheetah_matches_gymnasium_physics() -> None:
    ours = gym.make("pararl/HalfCheetahDir-v0")
    theirs = gym.make("HalfCheetah-v5")
    o1, _ = ours.reset(seed=3)
    o2, _ = theirs.reset(seed=3)
    np.testing.assert_array_equal(o1, o2)
    s1, r1, *_ = ours.step(ACTION)
    s2, r2, *_ = theirs.step(ACTION)
    np.testing.assert_array_equal(s1, s2)
    assert r1 == pytest.approx(r2)  # direction +1 is HalfCheetah-v5's reward


def test_navigation_reward_is_minus_distance_and_it_ends_at_the_goal() -> None:
    env = gym.make("pararl/Navigation2D-v0")
    env.unwrapped.reset_task({"goal": (0.1, 0.0)})  # type: ignore[attr-defined]
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, [0.0, 0.0])
    obs, reward, terminated, _, _ = env.step(np.array([0.05, 0.5]))  # clipped to 0.1
    np.testing.assert_allclose(obs, [0.05, 0.1])
    assert reward == pytest.approx(-np.hypot(0.05, 0.1))
    assert not terminated
    _, reward, terminated, _, _ = env.step(np.array([0.05, -0.1]))
    assert terminated
    assert reward == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize(
    ("env_id", "key"),
    [
        ("pararl/HalfCheetahDir-v0", "direction"),
        ("pararl/HalfCheetahVel-v0", "velocity"),
        ("pararl/Navigation2D-v0", "goal"),
    ],
)
def test_sample_tasks_is_seeded_and_reset_task_keeps_the_task(env_id: str, key: str) -> None:
    env = gym.make(env_id)
    env.reset(seed=5)
    tasks = env.unwrapped.sample_tasks(6)  # type: ignore[attr-defined]
    env.reset(seed=5)
    assert env.unwrapped.sample_tasks(6) == tasks  # type: ignore[attr-defined]
    assert len(tasks) == 6
    assert all(set(t) == {key} for t in tasks)
    env.unwrapped.reset_task(tasks[2])  # type: ignore[attr-defined]
    env.reset(seed=1)  # reset keeps the task
    assert env.unwrapped.task == tasks[2]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("env_id", "bad"),
    [
        ("pararl/HalfCheetahDir-v0", {"direction": 0.5}),
        ("pararl/HalfCheetahDir-v0", {"velocity": 1.0}),
        ("pararl/HalfCheetahVel-v0", {"velocity": float("nan")}),
        ("pararl/Navigation2D-v0", {"goal": (1.0,)}),
        ("pararl/Navigation2D-v0", 0.3),
    ],
)
def test_bad_tasks_raise_usage_errors(env_id: str, bad: object) -> None:
    env = gym.make(env_id)
    with pytest.raises(UsageError, match=r"reset_task|direction|velocity"):
        env.unwrapped.reset_task(bad)  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="n must be an int >= 1"):
        env.unwrapped.sample_tasks(0)  # type: ignore[attr-defined]
