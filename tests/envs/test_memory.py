"""The memory tasks (`envs.memory`): Gymnasium's checker passes; StatelessCartPole is
CartPole-v1 with the velocities left out, step for step; RepeatPrevious pays what its
docstring says to a policy that remembers and to one that does not."""

from __future__ import annotations

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import pararl.envs  # noqa: F401 - registers the pararl/... ids
from pararl.envs.make import check_env_id, make_env
from pararl.envs.memory import RepeatPrevious, StatelessCartPole

IDS = ("pararl/StatelessCartPole-v0", "pararl/RepeatPrevious-v0")


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasiums_checker_passes(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", IDS)
def test_pararl_builds_them_by_id(env_id: str) -> None:
    """As `--env` takes them: the id checks out and the env factory builds it."""
    assert check_env_id(env_id) is not None
    env = make_env(env_id)
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
    finally:
        env.close()


def test_gymnasium_makes_them_after_importing_pararl_envs() -> None:
    """In a fresh interpreter: `import pararl.envs` registers the ids, and the
    `module:id` form makes Gymnasium import it itself."""
    code = (
        "import gymnasium as gym\n"
        "e = gym.make('pararl.envs:pararl/RepeatPrevious-v0')\n"
        "import pararl.envs\n"
        "f = gym.make('pararl/StatelessCartPole-v0')\n"
        "print(type(e.unwrapped).__name__, type(f.unwrapped).__name__)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["RepeatPrevious", "StatelessCartPole"]


def test_stateless_cartpoles_spaces_and_registration() -> None:
    env = gym.make("pararl/StatelessCartPole-v0")
    full = gym.make("CartPole-v1")
    assert isinstance(env.unwrapped, StatelessCartPole)
    space, full_space = env.observation_space, full.observation_space
    assert isinstance(space, gym.spaces.Box)
    assert isinstance(full_space, gym.spaces.Box)
    assert space.shape == (2,)
    assert space.dtype == np.float32
    np.testing.assert_array_equal(space.high, full_space.high[[0, 2]])
    np.testing.assert_array_equal(space.low, full_space.low[[0, 2]])
    assert env.action_space == full.action_space
    assert env.spec is not None
    assert env.spec.max_episode_steps == 500
    assert env.spec.reward_threshold == 475.0


def _balance(state: np.ndarray) -> int:
    """A controller on CartPole's full state that keeps the pole up for 500 steps."""
    x, x_dot, theta, theta_dot = state.tolist()
    return int(theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0)


@pytest.mark.parametrize("controller", ["balance", "random"])
def test_stateless_cartpole_is_cartpole_without_the_velocities(controller: str) -> None:
    """The same seed and actions: the observation is CartPole-v1's `obs[[0, 2]]`, the
    rewards, terminations and truncations its own (balanced: truncated at 500)."""
    env, full = gym.make("pararl/StatelessCartPole-v0"), gym.make("CartPole-v1")
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=7)
    state, _ = full.reset(seed=7)
    np.testing.assert_array_equal(obs, state[[0, 2]])
    steps, total, done = 0, 0.0, False
    while not done:
        action = _balance(state) if controller == "balance" else int(rng.integers(2))
        obs, reward, terminated, truncated, _ = env.step(action)
        state, full_reward, full_terminated, full_truncated, _ = full.step(action)
        np.testing.assert_array_equal(obs, state[[0, 2]])
        assert (reward, terminated, truncated) == (full_reward, full_terminated, full_truncated)
        steps, total, done = steps + 1, total + float(reward), terminated or truncated
    if controller == "balance":
        assert (steps, total, truncated) == (500, 500.0, True)
    else:
        assert terminated
        assert steps < 500


def test_repeat_previous_spaces_and_reset_seeding() -> None:
    env = gym.make("pararl/RepeatPrevious-v0")
    assert env.observation_space == gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    assert env.action_space == gym.spaces.Discrete(2)

    def symbols(seed: int) -> list[int]:
        obs, _ = env.reset(seed=seed)
        shown = [int(obs.argmax())]
        for _ in range(14):
            obs, *_ = env.step(0)
            assert obs.sum() == 1.0
            shown.append(int(obs.argmax()))
        return shown

    assert symbols(3) == symbols(3)
    assert symbols(3) != symbols(4)


def _episode(env: RepeatPrevious, policy: str, rng: np.random.Generator) -> tuple[float, int]:
    """One episode's return and length; `remember`: names the symbol `delay` steps back
    from what it has seen, `constant`: always 0, `random`: uniform."""
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    seen, total, steps, done = [int(obs.argmax())], 0.0, 0, False
    while not done:
        if policy == "remember":
            action = seen[-1 - env.delay] if len(seen) > env.delay else 0
        else:
            action = 0 if policy == "constant" else int(rng.integers(env.symbols))
        obs, reward, terminated, truncated, _ = env.step(action)
        seen.append(int(obs.argmax()))
        total, steps, done = total + float(reward), steps + 1, terminated or truncated
    assert terminated
    assert not truncated
    return total, steps


@pytest.mark.parametrize(("symbols", "delay", "length"), [(2, 1, 16), (4, 2, 32), (3, 0, 8)])
def test_repeat_previous_pays_its_documented_returns(symbols: int, delay: int, length: int) -> None:
    """Remembering gets the most, every episode; a constant or random policy gets the
    chance return in expectation (2,000 episodes: within 4 standard errors)."""
    env = RepeatPrevious(symbols=symbols, delay=delay, length=length)
    rng = np.random.default_rng(0)
    assert env.max_return == 1.0
    assert env.chance_return == pytest.approx(2 / symbols - 1)
    for _ in range(20):
        assert _episode(env, "remember", rng) == (pytest.approx(1.0), length)
    episodes = 2_000
    for policy in ("constant", "random"):
        returns = np.array([_episode(env, policy, rng)[0] for _ in range(episodes)])
        # each rewarded step pays +-1/n, right with probability p = 1/symbols
        n, p = length - delay, 1 / symbols
        sd = 2 * np.sqrt(n * p * (1 - p)) / n
        assert returns.mean() == pytest.approx(env.chance_return, abs=4 * sd / np.sqrt(episodes))


def test_repeat_previous_defaults_and_bad_arguments() -> None:
    env = RepeatPrevious()
    assert (env.symbols, env.delay, env.length) == (2, 1, 16)
    assert env.chance_return == 0.0
    with pytest.raises(ValueError, match="symbols must be >= 2"):
        RepeatPrevious(symbols=1)
    with pytest.raises(ValueError, match="0 <= delay < length"):
        RepeatPrevious(delay=16, length=16)
    env.reset(seed=0)
    for _ in range(16):
        env.step(0)
    with pytest.raises(RuntimeError, match="step after the episode ended"):
        env.step(0)
