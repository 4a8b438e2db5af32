"""`MultiTaskSampler`: fixed-length episodes of many tasks from N workers × M envs.

Each `sample(tasks, episodes_per_task)` gives every env a task (`reset_task`
through the vector env; task j runs on envs j, j + T, j + 2T, ..., so each task is
spread over the workers), resets, and then loops: one forward pass over the envs
that are back, `send` their actions, `recv` under the chosen policy (see
`pararl.samplers.meta.recv`), until every env has run its episodes. Results come back
per task as arrays (`TaskEpisodes`) with timing statistics (`SampleStats`).

A policy with `act_tasks(obs, noise, tasks)` (`pararl.models.gaussian.TaskPolicy`) is
told the task of every row, so each task's envs can act with that task's own
parameters (MAML's adapted policies); others get `act(obs, noise)`.

Actions use noise drawn per (env, episode, step) from the sample seed, so the
episodes do not depend on the recv policy or on the backend: the serial twin
(`backend="serial"`) gives the same episodes as the worker processes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

import pararl.envs  # noqa: F401 - registers the pararl/... ids
from pararl.envs.modules import import_env_module, split_env_id
from pararl.envs.quiet import compiles_mujoco, quiet_mujoco
from pararl.errors import UsageError
from pararl.models.gaussian import NoisePolicy
from pararl.mp.topology import split_evenly
from pararl.samplers.meta.auto import Auto
from pararl.samplers.meta.episodes import EpisodeBuffer, TaskEpisodes
from pararl.samplers.meta.recv import MinEnvs, RecvPolicy, Timeout, WaitAll
from pararl.vector import ParallelVectorEnv, SerialVectorEnv
from pararl.vector.core import BatchVectorEnv


@dataclass
class SampleStats:
    """What one `sample` cost and how it was batched."""

    wall_s: float = 0.0
    env_steps: int = 0
    recv_calls: int = 0
    forward_passes: int = 0
    forward_s: float = 0.0
    envs_per_forward: list[int] = field(default_factory=list)
    workers_per_recv: list[int] = field(default_factory=list)

    @property
    def mean_workers_per_recv(self) -> float:
        return float(np.mean(self.workers_per_recv)) if self.workers_per_recv else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "wall_s": self.wall_s,
            "env_steps": self.env_steps,
            "recv_calls": self.recv_calls,
            "forward_passes": self.forward_passes,
            "forward_s": self.forward_s,
            "mean_envs_per_forward": float(np.mean(self.envs_per_forward or [0])),
            "mean_workers_per_recv": self.mean_workers_per_recv,
        }


@dataclass(frozen=True)
class SampleResult:
    episodes: list[TaskEpisodes]  # one per task, in the order given
    stats: SampleStats


def make_task_env(env_id: str, episode_length: int, kwargs: dict[str, Any]) -> gym.Env:
    """A task env whose time limit is the sampler's episode length (module level: pickles)."""
    module, name = split_env_id(env_id)
    if module is not None:
        import_env_module(module, env_id)
    spec = gym.registry.get(name)
    if spec is not None and compiles_mujoco(spec.entry_point):
        quiet_mujoco()
    return gym.make(env_id, max_episode_steps=episode_length, disable_env_checker=True, **kwargs)


class MultiTaskSampler:
    """Meta-RL sampler over a `ParallelVectorEnv` (or its serial twin).

    Args:
        env_id: a registered env with `sample_tasks(n)` and `reset_task(task)`.
        policy: acting policy (`act(obs, noise) -> (actions, log_probs)`).
        num_workers, envs_per_worker: N worker processes × M envs each.
        episode_length: steps per episode (the env's time limit is set to it).
        recv: 'all', 'timeout=T', 'min_envs=K', 'auto', or a `RecvPolicy`.
        backend: 'parallel' (worker processes) or 'serial' (in this process).
        worker_timeout: seconds a worker may take to answer before an error.
    """

    def __init__(
        self,
        env_id: str,
        policy: NoisePolicy,
        *,
        num_workers: int,
        envs_per_worker: int,
        episode_length: int = 100,
        recv: str | RecvPolicy = "all",
        backend: Literal["parallel", "serial"] = "parallel",
        env_kwargs: dict[str, Any] | None = None,
        worker_timeout: float = 60.0,
        context: str | None = None,
    ) -> None:
        if num_workers < 1 or envs_per_worker < 1 or episode_length < 1:
            raise UsageError(
                "num_workers, envs_per_worker and episode_length must all be >= 1, got "
                f"{num_workers}, {envs_per_worker}, {episode_length}"
            )
        if backend not in ("parallel", "serial"):
            raise UsageError(f"backend must be 'parallel' or 'serial', got {backend!r}")
        self.recv_policy = parse_recv(recv)
        self.policy = policy
        self.episode_length = episode_length
        factory = functools.partial(make_task_env, env_id, episode_length, env_kwargs or {})
        self._tasks_env = _task_env(factory, env_id)
        obs_space, act_space = self._tasks_env.observation_space, self._tasks_env.action_space
        if not isinstance(obs_space, spaces.Box) or not isinstance(act_space, spaces.Box):
            raise UsageError(f"{env_id}: MultiTaskSampler needs Box observations and actions")
        if int(np.prod(act_space.shape)) != policy.action_dim:
            raise UsageError(
                f"the policy acts in {policy.action_dim} dims but {env_id} has "
                f"{int(np.prod(act_space.shape))}"
            )
        num_envs = num_workers * envs_per_worker
        fns = [factory] * num_envs
        mode = AutoresetMode.SAME_STEP
        self.venv: BatchVectorEnv = (
            ParallelVectorEnv(
                fns,
                num_workers=num_workers,
                context=context,
                autoreset_mode=mode,
                worker_timeout=worker_timeout,
            )
            if backend == "parallel"
            else SerialVectorEnv(fns, autoreset_mode=mode, worker_timeout=worker_timeout)
        )
        self.num_envs = num_envs
        self._task_of = np.zeros(num_envs, np.int64)  # the task of every env, set by `sample`
        self.worker_of = np.concatenate(
            [
                np.full(len(r), w)
                for w, r in enumerate(split_evenly(num_envs, self.venv.num_workers))
            ]
        )

    # --- tasks ------------------------------------------------------------------------

    def sample_tasks(self, n: int, seed: int | None = None) -> list[Any]:
        """`n` tasks from the env's task distribution (seeded by `seed` if given)."""
        if seed is not None:
            self._tasks_env.reset(seed=seed)
        return list(self._tasks_env.unwrapped.sample_tasks(n))  # type: ignore[attr-defined]

    def assign(self, num_tasks: int, episodes_per_task: int) -> tuple[np.ndarray, int]:
        """The task of every env, and how many episodes each env runs."""
        n = self.num_envs
        if num_tasks < 1 or n % num_tasks:
            raise UsageError(
                f"{num_tasks} tasks cannot be spread evenly over {n} envs; "
                "use a number of tasks that divides workers × envs per worker"
            )
        per_task = n // num_tasks
        if episodes_per_task < 1 or episodes_per_task % per_task:
            raise UsageError(
                f"episodes_per_task={episodes_per_task} must be a positive multiple of "
                f"the {per_task} envs each task runs on"
            )
        return np.arange(n) % num_tasks, episodes_per_task // per_task

    # --- sampling ----------------------------------------------------------------------

    def sample(
        self, tasks: Sequence[Any], episodes_per_task: int, seed: int | None = None
    ) -> SampleResult:
        """Run `episodes_per_task` episodes of every task; see the module docstring."""
        task_of, per_env = self.assign(len(tasks), episodes_per_task)
        self._task_of = task_of
        venv = self.venv
        venv.reset_task([tasks[j] for j in task_of])
        obs, _ = venv.reset(seed=seed)
        buffer = EpisodeBuffer(
            self.num_envs,
            per_env,
            self.episode_length,
            venv.single_observation_space.shape or (),
            self.policy.action_dim,
            seed,
        )
        stats = SampleStats()
        start = time.perf_counter()
        self.recv_policy.begin(self.num_envs, self.worker_of, self._forward_cost(obs))
        self._loop(buffer, np.arange(self.num_envs), obs, stats)
        stats.wall_s = time.perf_counter() - start
        episodes = [
            buffer.task_episodes(task, np.flatnonzero(task_of == j)) for j, task in enumerate(tasks)
        ]
        return SampleResult(episodes, stats)

    def _loop(
        self, buffer: EpisodeBuffer, ready: np.ndarray, obs: np.ndarray, stats: SampleStats
    ) -> None:
        venv, in_flight = self.venv, 0
        while True:
            if ready.size:
                t0 = time.perf_counter()
                actions, log_probs = self._act(obs, buffer.noise_for(ready), ready)
                seconds = time.perf_counter() - t0
                self.recv_policy.after_forward(ready.size, seconds)
                stats.forward_passes += 1
                stats.forward_s += seconds
                stats.envs_per_forward.append(int(ready.size))
                buffer.record_act(ready, obs, actions, log_probs)
                venv.send(actions, ready)
                in_flight += ready.size
            if not in_flight:
                return
            parts_ids, parts_obs = [], []
            for o, rew, term, trunc, infos, ids in self.recv_policy.recv(venv):
                stats.recv_calls += 1
                stats.workers_per_recv.append(len(np.unique(self.worker_of[ids])))
                stats.env_steps += ids.size
                in_flight -= ids.size
                more = buffer.record_result(ids, o, rew, term, trunc, infos)
                parts_ids.append(ids[more])
                parts_obs.append(o[more])
            ready, obs = np.concatenate(parts_ids), np.concatenate(parts_obs)

    def _act(
        self, obs: np.ndarray, noise: np.ndarray, ids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The policy's actions for the envs `ids` (with their tasks, if it takes them)."""
        act_tasks = getattr(self.policy, "act_tasks", None)
        if act_tasks is None:
            return self.policy.with_noise(obs, noise)
        return act_tasks(obs, noise, self._task_of[ids])

    def _forward_cost(self, obs: np.ndarray) -> Any:
        """Seconds of one forward pass at a batch size (median of 3, after a warm-up)."""

        def cost(batch: int) -> float:
            rows = obs[np.arange(batch) % len(obs)]
            noise = np.zeros((batch, self.policy.action_dim), np.float32)
            times = []
            for _ in range(4):
                t0 = time.perf_counter()
                self.policy.with_noise(rows, noise)
                times.append(time.perf_counter() - t0)
            return float(np.median(times[1:]))

        return cost

    # --- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        self.venv.close()
        self._tasks_env.close()

    def __enter__(self) -> MultiTaskSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_recv(spec: str | RecvPolicy) -> RecvPolicy:
    """A policy from text: 'all', 'auto', 'timeout=T' (seconds) or 'min_envs=K'
    (an env count, or a fraction of all envs when < 1)."""
    if not isinstance(spec, str):
        return spec
    text = spec.strip().lower()
    if text in ("all", "wait_all", "none"):
        return WaitAll()
    if text == "auto":
        return Auto()
    key, _, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = None
    if key == "timeout" and number is not None:
        return Timeout(number)
    if key == "min_envs" and number is not None:
        return MinEnvs(number)
    raise UsageError(
        f"unknown recv policy {spec!r}; use 'all', 'auto', 'timeout=SECONDS' or "
        "'min_envs=K' (K an env count, or a fraction of all envs when < 1)"
    )


def _task_env(factory: Any, env_id: str) -> gym.Env:
    try:
        env = factory()
    except gym.error.Error as exc:
        raise UsageError(f"cannot make '{env_id}': {exc}") from exc
    if not all(hasattr(env.unwrapped, m) for m in ("sample_tasks", "reset_task")):
        env.close()
        raise UsageError(
            f"{env_id} is not a task env: it needs sample_tasks(n) and reset_task(task)"
        )
    return env


__all__ = ["MultiTaskSampler", "SampleResult", "SampleStats", "TaskEpisodes", "parse_recv"]
