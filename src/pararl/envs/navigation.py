"""`Navigation2D`: a point moves in the plane towards a goal (the task); pure NumPy.

MAML's 2-D navigation task: the observation is the position (starting at the
origin), an action moves it by at most 0.1 per axis, the reward is minus the
distance to the goal, and the episode ends when the point is within 0.01 of the
goal. It needs no simulator, so tests and quick benchmarks run anywhere and fast.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from pararl.envs.tasks import task_count
from pararl.errors import UsageError


class Navigation2D(gym.Env[np.ndarray, np.ndarray]):
    """Task: a goal {'goal': (x, y)} with coordinates sampled uniformly in [-0.5, 0.5]."""

    metadata = {"render_modes": []}  # noqa: RUF012 - Gymnasium declares it so
    goal_range = 0.5
    max_move = 0.1
    success_radius = 0.01

    def __init__(self, task: dict[str, Any] | None = None, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = spaces.Box(-self.max_move, self.max_move, (2,), np.float32)
        self._goal = np.zeros(2)
        self._pos = np.zeros(2)
        self.reset_task(task if task is not None else {"goal": (0.25, 0.25)})

    @property
    def goal(self) -> tuple[float, float]:
        return float(self._goal[0]), float(self._goal[1])

    @property
    def task(self) -> dict[str, tuple[float, float]]:
        return {"goal": self.goal}

    def sample_tasks(self, n: int) -> list[dict[str, tuple[float, float]]]:
        """`n` goals, uniform on the square [-0.5, 0.5]^2 (from this env's RNG)."""
        goals = self.np_random.uniform(-self.goal_range, self.goal_range, size=(task_count(n), 2))
        return [{"goal": (float(x), float(y))} for x, y in goals]

    def reset_task(self, task: dict[str, Any]) -> None:
        goal = task.get("goal") if isinstance(task, dict) else None
        array = np.asarray(goal, dtype=np.float64) if goal is not None else None
        if array is None or array.shape != (2,) or not np.isfinite(array).all():
            raise UsageError(
                f"Navigation2D.reset_task: expected {{'goal': (x, y)}} with finite "
                f"coordinates (from sample_tasks), got {task!r}"
            )
        self._goal = array

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._pos = np.zeros(2)
        return self._pos.astype(np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        move = np.clip(np.asarray(action, dtype=np.float64), -self.max_move, self.max_move)
        self._pos = self._pos + move
        distance = float(np.linalg.norm(self._pos - self._goal))
        return self._pos.astype(np.float32), -distance, distance < self.success_radius, False, {}
