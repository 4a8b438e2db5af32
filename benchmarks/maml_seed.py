"""The MAML sampler of the parallel-sampling post, re-implemented as the anchor:
`SynVectorEnv` with one command `Queue` per worker, one shared answer `Queue`,
`RawArray`s read back as a `copy.deepcopy` per answer; with `MultiTaskSampler`'s
interface and a timeout on every wait added so it runs in MAML's loop.
"""

from __future__ import annotations

import copy
import functools
import multiprocessing as mp
from ctypes import c_double, c_float, c_int64
from multiprocessing.sharedctypes import RawArray
from queue import Empty
from typing import Any

import gymnasium as gym
import numpy as np

from pararl.samplers.meta.episodes import TaskEpisodes
from pararl.samplers.meta.sampler import SampleResult, SampleStats, make_task_env

C_TYPES: dict[type, Any] = {np.float32: c_float, np.float64: c_double, np.int64: c_int64}
WAIT_S = 120.0  # bound on every blocking wait (not in the seed)


def shared(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    raw = RawArray(C_TYPES[np.dtype(dtype).type], int(np.prod(shape)))
    return np.frombuffer(raw, np.dtype(dtype)).reshape(shape)


def child_main(
    index: int, env_fns: list[Any], block: dict[str, np.ndarray], inbox: Any, barrier: Any
) -> None:
    """The post's `ChildEnv.run`: wait for a command, act on every env of the slice."""
    envs = [fn() for fn in env_fns]
    while True:
        instruction, data = inbox.get()
        if instruction is None:
            break
        if instruction == 1:  # reset_task: no answer
            for env, task in zip(envs, data, strict=True):
                env.unwrapped.reset_task(task)
            continue
        if instruction == 0:  # reset
            infos = []
            for i, env in enumerate(envs):
                block["next_obs"][i], info = env.reset(seed=data + i)
                infos.append(info)
            barrier.put((index, 0, infos))
            continue
        for i, env in enumerate(envs):  # step
            obs, reward, terminated, truncated, _ = env.step(block["actions"][i])
            if terminated or truncated:
                block["next_obs_truncated"][i] = obs
                block["next_obs"][i], _ = env.reset()
            else:
                block["next_obs"][i] = obs
            block["rewards"][i] = reward
            block["terminated"][i] = terminated
            block["truncated"][i] = truncated
        barrier.put((index, 2, None))


class SynVectorEnv:
    """The post's vector env: queues for commands and answers, RawArray data."""

    def __init__(self, env_fns: list[Any], n_process: int) -> None:
        assert len(env_fns) % n_process == 0, "env_fns must be divided by n_process"
        self.n_process, self.per = n_process, len(env_fns) // n_process
        probe = env_fns[0]()
        obs_shape = probe.observation_space.shape
        act_dim = int(np.prod(probe.action_space.shape))
        probe.close()
        n, per = len(env_fns), self.per
        shapes = {"actions": (n, act_dim), "rewards": (n,), "next_obs": (n, *obs_shape),
                  "next_obs_truncated": (n, *obs_shape), "terminated": (n,),
                  "truncated": (n,)}  # fmt: skip
        self.data = {k: shared(shape, np.float32) for k, shape in shapes.items()}
        ctx = mp.get_context("fork")
        self.queues = [ctx.Queue() for _ in range(n_process)]
        self.barrier = ctx.Queue()
        self.blocks = [{k: v[i * per : (i + 1) * per] for k, v in self.data.items()}
                       for i in range(n_process)]  # fmt: skip
        self.procs = [ctx.Process(target=child_main, daemon=True, args=(
            i, env_fns[i * per : (i + 1) * per], self.blocks[i], self.queues[i], self.barrier))
            for i in range(n_process)]  # fmt: skip
        for p in self.procs:
            p.start()
        self.running_num = 0

    def reset(self, seed: int) -> dict[int, list[Any]]:
        for i, queue in enumerate(self.queues):
            queue.put((0, seed + i * self.per))
        results = {}
        for _ in range(self.n_process):
            index, instruction, info = self.barrier.get(timeout=WAIT_S)
            assert instruction == 0
            results[index] = [copy.deepcopy(self.blocks[index]), info]
        return results

    def reset_task(self, tasks: list[Any]) -> None:
        for i, queue in enumerate(self.queues):
            queue.put((1, tasks[i * self.per : (i + 1) * self.per]))

    def step_send(self, index: int, actions: np.ndarray) -> None:
        self.blocks[index]["actions"][:] = actions
        self.queues[index].put((2, None))
        self.running_num += 1

    def step_recv(self) -> dict[int, list[Any]] | None:
        if self.running_num == 0:
            return None
        index, instruction, info = self.barrier.get(timeout=WAIT_S)
        assert instruction == 2
        results = {index: [copy.deepcopy(self.blocks[index]), info]}
        for _ in range(self.running_num - 1):
            try:
                index, instruction, info = self.barrier.get(timeout=0.0001)
                results[index] = [copy.deepcopy(self.blocks[index]), info]
            except Empty:
                pass
        self.running_num -= len(results)
        return results

    def close(self) -> None:
        for queue in self.queues:
            queue.put((None, None))
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join(timeout=10)


class SeedSampler:
    """The post's `MultiTaskSampler.sample` loop behind pararl's sampler interface."""

    def __init__(
        self, env_id: str, policy: Any, *, num_workers: int, num_envs: int, episode_length: int
    ) -> None:
        self.policy, self.length = policy, episode_length
        factory = functools.partial(make_task_env, env_id, episode_length, {})
        self.env: gym.Env = factory()
        self.num_workers, self.per = num_workers, num_envs // num_workers
        self.venv = SynVectorEnv([factory] * num_envs, num_workers)

    def sample_tasks(self, n: int, seed: int | None = None) -> list[Any]:
        if seed is not None:
            self.env.reset(seed=seed)
        return list(self.env.unwrapped.sample_tasks(n))  # type: ignore[attr-defined]

    def sample(
        self, tasks: list[Any], episodes_per_task: int, seed: int | None = None
    ) -> SampleResult:
        n = len(tasks) * episodes_per_task
        assert n == self.num_workers * self.per, "one env per episode"
        task_of = np.arange(n) % len(tasks)
        rng = np.random.default_rng(seed)
        stats = SampleStats()
        self.venv.reset_task([tasks[j] for j in task_of])
        data = self.venv.reset(seed=seed or 0)
        done_times = np.full(self.num_workers, self.length + 1)
        results: list[list[dict[str, np.ndarray]]] = [[] for _ in range(self.num_workers)]
        actions_of: list[list[np.ndarray]] = [[] for _ in range(self.num_workers)]
        while data:
            for index in list(data):  # the post's bookkeeping: one copy per step
                results[index].append(data[index][0])
                done_times[index] -= 1
                if done_times[index] == 0:
                    data.pop(index)
            if not data:
                data = self.venv.step_recv() or {}
                continue
            order = list(data)
            obs = np.concatenate([data[i][0]["next_obs"] for i in order])
            ids = np.concatenate([np.arange(i * self.per, (i + 1) * self.per) for i in order])
            noise = rng.standard_normal((len(ids), self.policy.action_dim)).astype(np.float32)
            actions, _ = self.policy.act_tasks(obs, noise, task_of[ids])
            stats.forward_passes += 1
            for k, index in enumerate(order):
                chunk = actions[k * self.per : (k + 1) * self.per]
                actions_of[index].append(chunk)
                self.venv.step_send(index, chunk)
            stats.env_steps += len(ids)
            data = self.venv.step_recv() or {}
        episodes = self.collect(results, actions_of, task_of, tasks)
        return SampleResult(episodes, stats)

    def collect(
        self,
        results: list[list[dict[str, np.ndarray]]],
        actions_of: list[list[np.ndarray]],
        task_of: np.ndarray,
        tasks: list[Any],
    ) -> list[TaskEpisodes]:
        """Per worker [steps + 1] copies -> per-task arrays [episodes, L, ...]."""

        def stacked(key: str, first: int = 0) -> np.ndarray:
            return np.concatenate([np.stack([r[key] for r in w[first:]]) for w in results], 1)

        obs, final = stacked("next_obs"), stacked("next_obs_truncated")
        rew, term, trunc = (stacked(key, 1) for key in ("rewards", "terminated", "truncated"))
        acts = np.concatenate([np.stack(a) for a in actions_of], axis=1)
        ended = (term + trunc) > 0
        mask = np.cumsum(ended, axis=0) - ended < 1  # real steps: up to the first end
        next_obs = np.where(ended[..., None], final[1:], obs[1:])

        def per_task(a: np.ndarray, j: int) -> np.ndarray:
            return np.swapaxes(a[:, task_of == j], 0, 1)

        return [
            TaskEpisodes(
                task=task,
                observations=per_task(obs[:-1], j),
                next_observations=per_task(next_obs, j),
                actions=per_task(acts, j),
                rewards=per_task(rew.astype(np.float64), j),
                log_probs=np.zeros(per_task(rew, j).shape, np.float32),
                terminated=per_task(term > 0, j) & per_task(mask, j),
                truncated=per_task(trunc > 0, j) & per_task(mask, j),
                mask=per_task(mask, j),
                env_ids=np.flatnonzero(task_of == j),
            )
            for j, task in enumerate(tasks)
        ]

    def close(self) -> None:
        self.venv.close()
        self.env.close()
