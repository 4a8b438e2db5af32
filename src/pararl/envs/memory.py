"""Tasks that need memory: what a policy sees now does not tell it what to do, what
it saw before does. A feed-forward policy is held to what the present shows; a
recurrent one (an LSTM or a GRU over the episode) can do better.

- `StatelessCartPole` (`pararl/StatelessCartPole-v0`): CartPole-v1 with its
  velocities hidden, as rl-baselines3-zoo's CartPoleNoVel-v1 and POPGym's
  PositionOnlyCartPole hide them: the cart's position and the pole's angle alone.
  Rewards, termination and the 500-step time limit are CartPole-v1's, so 500 is
  the most an episode returns. The velocities can be told from two positions in a
  row, which a memory has and one observation has not.
- `RepeatPrevious` (`pararl/RepeatPrevious-v0`): say which symbol was shown `delay`
  steps ago. Its returns are known in closed form (the class says them), so a
  learning curve can be read against the most a policy can get and against what no
  memory can beat.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

SEEN = (0, 2)  # CartPole's observation: x, x_dot, theta, theta_dot; the positions kept


class StatelessCartPole(CartPoleEnv):
    """CartPole-v1 whose observation is `[x, theta]` (cart position, pole angle): the
    same state, dynamics, rewards (1 a step), termination and, registered, the same
    500-step time limit; the velocities are simulated but not shown. The bounds are
    CartPole's own for those two entries."""

    def __init__(self, sutton_barto_reward: bool = False, render_mode: str | None = None) -> None:
        super().__init__(sutton_barto_reward=sutton_barto_reward, render_mode=render_mode)
        full = self.observation_space
        assert isinstance(full, spaces.Box)
        index = list(SEEN)
        self.observation_space = spaces.Box(full.low[index], full.high[index], dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        return obs[list(SEEN)], info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs[list(SEEN)], float(reward), terminated, truncated, info


class RepeatPrevious(gym.Env[np.ndarray, np.int64]):
    """Each step shows one of `symbols` symbols, drawn uniformly and independently
    (one-hot, `Box(0, 1, (symbols,))`); the action (`Discrete(symbols)`) names the
    symbol shown `delay` steps before the one in view. An episode is `length` steps
    and then ends (terminated: nothing comes after it). Its first `delay` steps have
    no earlier symbol to name and pay 0; each of the other `length - delay` pays
    `+1 / (length - delay)` for the right symbol and `-1 / (length - delay)` for a
    wrong one.

    Returns (with the defaults `symbols=2, delay=1, length=16`):
    - the most: `1.0` (every named symbol right), which a policy that remembers the
      last `delay` symbols gets every episode;
    - chance: `2 / symbols - 1` in expectation (`0.0`), what a policy that does not
      remember gets at best, whatever it does: the symbol to name is independent of
      everything the present observation shows (a constant action, a uniformly
      random one, a feed-forward network's);
    - `delay=0` names the symbol in view: a feed-forward check of the same env
      (most: 1.0).

    The defaults are a task small enough to learn in seconds: one step of memory, two
    symbols, 16-step episodes. Everything random comes from the env's own generator,
    seeded by `reset(seed=...)`."""

    metadata = {"render_modes": []}  # noqa: RUF012 - Gymnasium declares it so

    def __init__(
        self,
        symbols: int = 2,
        delay: int = 1,
        length: int = 16,
        render_mode: str | None = None,
    ) -> None:
        if symbols < 2:
            raise ValueError(f"RepeatPrevious: symbols must be >= 2, got {symbols}")
        if delay < 0 or length <= delay:
            raise ValueError(
                f"RepeatPrevious: needs 0 <= delay < length, got delay {delay}, length {length}"
            )
        self.symbols, self.delay, self.length = symbols, delay, length
        self.render_mode = render_mode
        self.observation_space = spaces.Box(0.0, 1.0, (symbols,), np.float32)
        self.action_space = spaces.Discrete(symbols)
        self._shown = np.zeros(length, np.int64)  # the symbol shown before each step
        self._t = 0

    @property
    def max_return(self) -> float:
        """The most an episode returns (every named symbol right)."""
        return 1.0

    @property
    def chance_return(self) -> float:
        """The expected return of any policy without memory (uniformly random symbols:
        right with probability 1 / symbols)."""
        return 2.0 / self.symbols - 1.0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.symbols, np.float32)
        obs[self._shown[self._t]] = 1.0
        return obs

    def target(self) -> int | None:
        """The symbol the next action should name (None in the first `delay` steps)."""
        if self._t < self.delay:
            return None
        return int(self._shown[self._t - self.delay])

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._shown = self.np_random.integers(0, self.symbols, self.length)
        self._t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._t >= self.length:
            raise RuntimeError("RepeatPrevious: step after the episode ended; call reset()")
        target, scale = self.target(), 1.0 / (self.length - self.delay)
        reward = 0.0 if target is None else (scale if int(action) == target else -scale)
        self._t += 1
        terminated = self._t >= self.length
        # the last step shows nothing new: its observation is the final one, acted on by nobody
        obs = np.zeros(self.symbols, np.float32) if terminated else self._obs()
        return obs, reward, terminated, False, {}


__all__ = ["RepeatPrevious", "StatelessCartPole"]
