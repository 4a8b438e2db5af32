"""`--mode auto` for PPO: step the envs in this process, or in worker processes.

In sync mode the main process sends actions to the workers and waits for them at
every vector step, so workers pay only when the env time they take off this process
is larger than what talking to them costs: one round trip per step (a pipe write,
a wake-up, the reply, a wake-up back). With W workers the main process is spared
(1 - 1/W) of the envs' stepping time. CartPole steps in ~6 µs, so 8 of its envs
cost less than a round trip and are faster stepped here; HalfCheetah (~50 µs)
pays off from a few envs per worker. The env's step time is measured at start-up,
on one env with random actions, for a few milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym

# One vector step's round trip to the workers (8 CartPole envs on 2 workers, minus
# their stepping time), measured by `python -m pararl.runners.ppo_mode` on 2 cores.
ROUND_TRIP_S = 180e-6
MEASURE_BUDGET_S = 0.03


@dataclass(frozen=True)
class ModeChoice:
    mode: str
    env_step_s: float | None
    reason: str


def measure_step_s(env_fn: Callable[[], gym.Env], budget_s: float = MEASURE_BUDGET_S) -> float:
    """Mean seconds per `step` of one env with random actions (resets not counted)."""
    env = env_fn()
    try:
        env.action_space.seed(0)
        env.reset(seed=0)
        env.step(env.action_space.sample())  # first-step costs (lazy set-up) not counted
        steps, spent = 0, 0.0
        while spent < budget_s or steps < 20:
            action = env.action_space.sample()
            start = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            spent += time.perf_counter() - start
            steps += 1
            if terminated or truncated:
                env.reset()
        return spent / steps
    finally:
        env.close()


def choose_mode(
    requested: str, env_fn: Callable[[], gym.Env], num_envs: int, workers: int
) -> ModeChoice:
    """The requested mode, or for `auto` the one whose vector step is cheaper."""
    if requested != "auto":
        return ModeChoice(requested, None, "asked for")
    if workers < 2:
        return ModeChoice("serial", None, "one core")
    step_s = measure_step_s(env_fn)
    spared = (1 - 1 / workers) * num_envs * step_s
    mode = "sync" if spared > ROUND_TRIP_S else "serial"
    reason = (
        f"env step {step_s * 1e6:.1f} µs x {num_envs} envs: workers would spare "
        f"{spared * 1e6:.0f} µs per step, a round trip costs ~{ROUND_TRIP_S * 1e6:.0f} µs"
    )
    return ModeChoice(mode, step_s, reason)


def _measure_round_trip(envs_per_worker: int = 4, workers: int = 2, steps: int = 2000) -> None:
    """Print the round trip: parallel vector step minus the envs' own stepping time."""
    import numpy as np

    from pararl.envs.make import env_factory
    from pararl.vector import ParallelVectorEnv

    fn = env_factory("CartPole-v1")
    envs = ParallelVectorEnv([fn] * (workers * envs_per_worker), workers)
    try:
        envs.reset(seed=0)
        actions = np.zeros(envs.num_envs, dtype=np.int64)
        for _ in range(100):
            envs.step(actions)
        start = time.perf_counter()
        for _ in range(steps):
            envs.step(actions)
        per_step = (time.perf_counter() - start) / steps
    finally:
        envs.close()
    own = envs_per_worker * measure_step_s(fn, 0.2)
    print(f"vector step {per_step * 1e6:.0f} µs, of which stepping {own * 1e6:.0f} µs")
    print(f"round trip ~{(per_step - own) * 1e6:.0f} µs")


if __name__ == "__main__":
    _measure_round_trip()
