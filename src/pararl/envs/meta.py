"""Meta-RL task envs on MuJoCo's half-cheetah: run in a direction, or at a speed.

Each env has `sample_tasks(n)` (plain, picklable dicts) and `reset_task(task)`, the
interface meta-RL samplers use to give every env its own task (the task families
of MAML's experiments; see garage's and ProMP's half-cheetah tasks). The task is
kept until the next `reset_task`; `reset` does not change it.

The compiled MuJoCo model is shared by every env of a process: it is read-only
during simulation, each env keeps its own `MjData`, so memory per env is the
simulation state alone and the compiler runs (and warns) once per process, not
once per env. Step infos carry only `x_velocity`: infos cross the worker pipes on
every step, and the samplers need none.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np
from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv

from pararl.envs.tasks import task_count
from pararl.errors import UsageError

_MODELS: dict[tuple[str, int, int], mujoco.MjModel] = {}


class _MetaCheetah(HalfCheetahEnv):
    """Half-cheetah whose forward reward depends on a task; control cost as in v5."""

    task_key = ""

    def __init__(self, task: dict[str, float] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._task: dict[str, float] = {}
        self.reset_task(task if task is not None else self.default_task())

    def _initialize_simulation(self) -> tuple[mujoco.MjModel, mujoco.MjData]:
        key = (self.fullpath, self.width, self.height)
        if key not in _MODELS:
            _MODELS[key] = super()._initialize_simulation()[0]
        model = _MODELS[key]
        return model, mujoco.MjData(model)

    def default_task(self) -> dict[str, float]:
        raise NotImplementedError

    def task_reward(self, x_velocity: float) -> float:
        raise NotImplementedError

    def check_task(self, value: float) -> None:
        raise NotImplementedError

    @property
    def task(self) -> dict[str, float]:
        """The current task (a copy)."""
        return dict(self._task)

    def reset_task(self, task: dict[str, float]) -> None:
        if not isinstance(task, dict) or set(task) != {self.task_key}:
            raise UsageError(
                f"{type(self).__name__}.reset_task: expected a dict {{'{self.task_key}': value}} "
                f"(from sample_tasks), got {task!r}"
            )
        value = float(task[self.task_key])
        self.check_task(value)
        self._task = {self.task_key: value}

    def step(  # type: ignore[override]  # v5 annotates float64 where floats are returned
        self, action: Any
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        x_before = float(self.data.qpos[0])
        self.do_simulation(action, self.frame_skip)
        x_velocity = (float(self.data.qpos[0]) - x_before) / self.dt
        reward = self.task_reward(x_velocity) - float(self.control_cost(action))
        return self._get_obs(), reward, False, False, {"x_velocity": x_velocity}


class HalfCheetahDir(_MetaCheetah):
    """Task: a direction d in {-1, +1}; reward = d * forward velocity - control cost."""

    task_key = "direction"

    def default_task(self) -> dict[str, float]:
        return {"direction": 1.0}

    def check_task(self, value: float) -> None:
        if value not in (-1.0, 1.0):
            raise UsageError(f"HalfCheetahDir: direction must be -1 or +1, got {value}")

    def sample_tasks(self, n: int) -> list[dict[str, float]]:
        """`n` directions, each -1 or +1 with equal chance (from this env's RNG)."""
        signs = 2 * self.np_random.integers(0, 2, size=task_count(n)) - 1
        return [{"direction": float(s)} for s in signs]

    def task_reward(self, x_velocity: float) -> float:
        return self._task["direction"] * self._forward_reward_weight * x_velocity


class HalfCheetahVel(_MetaCheetah):
    """Task: a target velocity v* in [0, 2]; reward = -|velocity - v*| - control cost."""

    task_key = "velocity"
    max_velocity = 2.0

    def default_task(self) -> dict[str, float]:
        return {"velocity": 1.0}

    def check_task(self, value: float) -> None:
        if not np.isfinite(value):
            raise UsageError(f"HalfCheetahVel: velocity must be finite, got {value}")

    def sample_tasks(self, n: int) -> list[dict[str, float]]:
        """`n` target velocities, uniform on [0, 2] (from this env's RNG)."""
        values = self.np_random.uniform(0.0, self.max_velocity, size=task_count(n))
        return [{"velocity": float(v)} for v in values]

    def task_reward(self, x_velocity: float) -> float:
        return -self._forward_reward_weight * abs(x_velocity - self._task["velocity"])
