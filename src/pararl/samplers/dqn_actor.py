"""DQN actor processes: each steps a batch of envs with its own CPU Q-network
copy, builds n-step transitions, and hands them to the learner in chunks through
a two-slot shared-memory outbox. Only slot numbers and counts travel on the pipe.

Protocol (actor -> learner): `(True, Chunk)` when a slot is filled; the learner
answers `("ack", slot)` once it has copied the slot, and `("close", None)` to stop.
An actor with both slots full waits for an ack: that is the back-pressure that
keeps sampling in step with learning.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

import gymnasium as gym
import numpy as np
import torch

from pararl import seeding
from pararl.models import QNetwork
from pararl.mp.procs import ParentWatch
from pararl.mp.shared import ArraySpec, SharedArrays
from pararl.samplers.chunks import Chunk
from pararl.samplers.explore import EpsilonSchedule, epsilon_greedy
from pararl.samplers.nstep import NStepBuilder, Transitions
from pararl.samplers.weights import WeightReader
from pararl.vector import SerialVectorEnv
from pararl.vector.core import BatchVectorEnv


@dataclass(frozen=True)
class ActorSpec:
    """Everything an actor needs; picklable."""

    env_fn: Callable[[], gym.Env]
    num_envs: int
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype  # stored as it comes: uint8 frames stay bytes up to the learner
    num_actions: int
    make_q: Callable[[], QNetwork]  # the run's Q-network constructor (picklable)
    n_step: int
    gamma: float
    chunk_steps: int  # vector steps per chunk sent to the learner
    sync_every: int  # vector steps between weight refreshes
    epsilon: EpsilonSchedule  # of the run's env steps

    @property
    def capacity(self) -> int:
        # a chunk emits at most one transition per env step, plus n-1 per env flushed
        return self.num_envs * (self.chunk_steps + self.n_step)


def outbox_specs(index: int, spec: ActorSpec) -> dict[str, ArraySpec]:
    cap, obs = spec.capacity, spec.obs_shape
    f32 = np.dtype(np.float32)
    return {
        f"a{index}.obs": ArraySpec((2, cap, *obs), spec.obs_dtype),
        f"a{index}.next_obs": ArraySpec((2, cap, *obs), spec.obs_dtype),
        f"a{index}.action": ArraySpec((2, cap), np.dtype(np.int64)),
        f"a{index}.ret": ArraySpec((2, cap), f32),
        f"a{index}.discount": ArraySpec((2, cap), f32),
        "env_steps": ArraySpec((1,), np.dtype(np.int64)),
    }


def read_slot(arrays: dict[str, np.ndarray], index: int, slot: int, count: int) -> Transitions:
    """A view of the transitions in an outbox slot (copy before acking)."""
    p = f"a{index}."
    return Transitions(
        arrays[p + "obs"][slot, :count],
        arrays[p + "action"][slot, :count],
        arrays[p + "ret"][slot, :count],
        arrays[p + "next_obs"][slot, :count],
        arrays[p + "discount"][slot, :count],
    )


def _write_slot(arrays: dict[str, np.ndarray], index: int, slot: int, batch: Transitions) -> None:
    p, n = f"a{index}.", len(batch)
    arrays[p + "obs"][slot, :n] = batch.obs
    arrays[p + "next_obs"][slot, :n] = batch.next_obs
    arrays[p + "action"][slot, :n] = batch.action
    arrays[p + "ret"][slot, :n] = batch.ret
    arrays[p + "discount"][slot, :n] = batch.discount


class ChunkSampler:
    """The acting half of every DQN actor, whatever carries its chunks: a Q-network
    acts epsilon-greedy on a vector env, and n-step transitions come out in chunks
    of `spec.chunk_steps` vector steps. Used in actor processes (their own
    `SerialVectorEnv` and CPU Q copy), in Ray actors, and in this process over any
    vector env (`samplers.local`). `seed`/`path` name its streams (`pararl.seeding`):
    its envs' reset seeds and its exploration."""

    def __init__(
        self,
        spec: ActorSpec,
        seed: int,
        path: tuple[int, ...],
        envs: BatchVectorEnv | None = None,
        q: QNetwork | None = None,
    ) -> None:
        self.spec = spec
        self.rng = seeding.generator(seed, "explore", *path)
        self.q = q or spec.make_q()
        self.envs = envs or SerialVectorEnv([spec.env_fn] * spec.num_envs)
        self.nstep = NStepBuilder(
            spec.num_envs, spec.obs_shape, spec.n_step, spec.gamma, spec.obs_dtype
        )
        self.obs, _ = self.envs.reset(seed=seeding.env_seeds(seed, spec.num_envs, "env", *path))
        self.steps = 0  # vector steps taken

    def sample(
        self, env_steps: Callable[[], int], every_step: Callable[[int], None] = lambda _: None
    ) -> tuple[Transitions, list[float], float]:
        """One chunk: (transitions, returns of episodes that ended, seconds it took).
        `env_steps` reads the run's step count (for epsilon); `every_step` is called
        with this actor's vector-step count after each step."""
        start, parts, returns = time.monotonic(), [], []
        for _ in range(self.spec.chunk_steps):
            eps = self.spec.epsilon(env_steps())
            actions = epsilon_greedy(self.q, self.obs, eps, self.rng)
            next_obs, reward, term, trunc, infos = self.envs.step(actions)
            parts.append(self.nstep.add(self.obs, actions, reward, next_obs, term, trunc))
            if "episode" in infos:
                returns += infos["episode"]["r"][infos["_episode"]].tolist()
            self.obs = next_obs
            self.steps += 1
            every_step(self.steps)
        batch = parts[0] if len(parts) == 1 else Transitions.concat(parts)
        return batch, returns, time.monotonic() - start

    @property
    def env_steps_per_chunk(self) -> int:
        return self.spec.chunk_steps * self.spec.num_envs

    def close(self) -> None:
        self.envs.close()


def actor_main(
    conn: Connection,
    index: int,
    spec: ActorSpec,
    shared: SharedArrays,
    seed: int,
    path: tuple[int, ...],
) -> None:
    """Act, chunk, send, repeat; until the learner says close or goes away."""
    torch.manual_seed(seeding.integer(seed, "torch", *path))
    arrays = shared.arrays
    sampler = ChunkSampler(spec, seed, path)
    weights = WeightReader(arrays)
    weights.refresh(sampler.q)

    def refresh(steps: int) -> None:
        if steps % spec.sync_every == 0:
            weights.refresh(sampler.q)

    watch, free, slot = ParentWatch(), [True, True], 0
    conn.send((True, None))  # ready
    try:
        while True:
            batch, returns, busy = sampler.sample(lambda: int(arrays["env_steps"][0]), refresh)
            while not free[slot]:  # wait for the learner to take the older chunk
                if not _handle_messages(conn, free, watch):
                    return
            _write_slot(arrays, index, slot, batch)
            free[slot] = False
            chunk = Chunk(
                slot, len(batch), sampler.env_steps_per_chunk, weights.version, returns, busy
            )
            conn.send((True, chunk))
            slot ^= 1
            if conn.poll(0) and not _handle_messages(conn, free, watch):
                return
    finally:
        sampler.close()


def _handle_messages(conn: Connection, free: list[bool], watch: ParentWatch) -> bool:
    """Wait (bounded) for learner messages; False when the actor should stop."""
    if not conn.poll(watch.interval):
        return not watch.orphaned()
    while conn.poll(0):
        command, data = conn.recv()
        if command == "close":
            return False
        if command == "ack":
            free[data] = True
    return True
