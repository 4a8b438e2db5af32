"""Actor processes of the off-policy learners (DQN, SAC): each steps a batch of envs
with its own CPU copy of the acting network, builds n-step transitions, and hands
them to the learner in chunks through a two-slot shared-memory outbox. Only slot
numbers and counts travel on the pipe. How an actor acts is its `ActingPolicy`
(`samplers.chunks.explore`: DQN's epsilon-greedy Q copy, SAC's squashed Gaussian).
A chunk holds whole-observation transitions (`replay.nstep`) or, when the env
stacks image frames, each new frame once (`replay.frame_steps`); Ape-X actors add
each transition's first priority, its TD error under their own Q copy.

Protocol (actor -> learner): `(True, Chunk)` when a slot is filled; the learner
answers `("ack", slot)` once it has copied the slot, and `("close", None)` to stop.
An actor with both slots full waits for an ack: that is the back-pressure that
keeps sampling in step with learning.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

import gymnasium as gym
import numpy as np
from torch import nn

from pararl import seeding
from pararl.mp.procs import ParentWatch
from pararl.mp.shared import ArraySpec, SharedArrays
from pararl.replay.frame_steps import FRAME_FIELDS, FrameStepBuilder, FrameSteps, frame_count
from pararl.replay.nstep import NStepBuilder, Transitions
from pararl.samplers.chunks.explore import ActingPolicy
from pararl.samplers.chunks.source import Chunk
from pararl.vector import SerialVectorEnv
from pararl.vector.core import BatchVectorEnv
from pararl.weights.shared import WeightReader


@dataclass(frozen=True)
class ActorSpec:
    """Everything an actor needs; picklable."""

    env_fn: Callable[[], gym.Env]
    num_envs: int
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype  # stored as it comes: uint8 frames stay bytes up to the learner
    policy: ActingPolicy  # its acting network's constructor and how it picks actions
    n_step: int
    gamma: float
    chunk_steps: int  # vector steps per chunk sent to the learner
    sync_every: int  # vector steps between weight refreshes
    frame_stack: int = 0  # > 0: chunks carry frames once (`replay.frame_steps`)
    stream_base: int = 0  # the run-wide id of this actor's first env (frame chunks)

    @property
    def priorities(self) -> bool:
        """Whether the chunks carry each transition's first priority (Ape-X)."""
        return self.policy.priorities is not None

    @property
    def capacity(self) -> int:
        # a chunk emits at most one transition per env step, plus n-1 per env flushed
        return self.num_envs * (self.chunk_steps + self.n_step)

    @property
    def frame_capacity(self) -> int:
        # one frame per env step, plus the envs' reset frames in the first chunk
        return self.num_envs * (self.chunk_steps + 1)


Payload = Transitions | FrameSteps


def outbox_specs(index: int, spec: ActorSpec) -> dict[str, ArraySpec]:
    """Two slots of each payload field; frame fields have `frame_capacity` rows."""
    cap, f32, i64 = spec.capacity, np.dtype(np.float32), np.dtype(np.int64)
    policy = spec.policy
    fields: dict[str, tuple[tuple[int, ...], np.dtype]] = {
        "action": ((cap, *policy.action_shape), policy.action_dtype),
        "ret": ((cap,), f32),
        "discount": ((cap,), f32),
    }
    if spec.frame_stack:
        frames = spec.frame_capacity
        fields |= {
            "frames": ((frames, *spec.obs_shape[1:]), np.dtype(np.uint8)),
            "stream": ((frames,), i64),
            "prev": ((frames,), i64),
            "next": ((cap,), i64),
            "steps": ((cap,), i64),
        }
    else:
        obs = ((cap, *spec.obs_shape), spec.obs_dtype)
        fields |= {"obs": obs, "next_obs": obs}
    if spec.priorities:
        fields["priority"] = ((cap,), f32)
    specs = {f"a{index}.{k}": ArraySpec((2, *shape), dtype) for k, (shape, dtype) in fields.items()}
    return specs | {"env_steps": ArraySpec((1,), i64)}


def read_slot(arrays: dict[str, np.ndarray], index: int, slot: int, chunk: Chunk) -> Payload:
    """A view of the payload in an outbox slot (copy before acking)."""
    p = f"a{index}."

    def rows(name: str) -> np.ndarray:
        count = chunk.frames if name in FRAME_FIELDS else chunk.count
        return arrays[p + name][slot, :count]

    priority = rows("priority") if p + "priority" in arrays else None
    if p + "frames" in arrays:
        return FrameSteps(
            frames=rows("frames"),
            stream=rows("stream"),
            prev=rows("prev"),
            next=rows("next"),
            steps=rows("steps"),
            action=rows("action"),
            ret=rows("ret"),
            discount=rows("discount"),
            priority=priority,
        )
    return Transitions(
        rows("obs"), rows("action"), rows("ret"), rows("next_obs"), rows("discount"), priority
    )


def _write_slot(arrays: dict[str, np.ndarray], index: int, slot: int, batch: Payload) -> None:
    for f in dataclasses.fields(batch):
        value = getattr(batch, f.name)
        if value is not None:
            arrays[f"a{index}.{f.name}"][slot, : len(value)] = value


class ChunkSampler:
    """The acting half of every off-policy actor, whatever carries its chunks: the
    acting network acts on a vector env as `spec.policy` says, and n-step transitions
    come out in chunks of `spec.chunk_steps` vector steps. Used in actor processes
    (their own `SerialVectorEnv` and CPU network copy), in Ray actors, and in this
    process over any vector env (`samplers.chunks.local`). `seed`/`path` name its
    streams (`pararl.seeding`): its envs' reset seeds and its exploration."""

    def __init__(
        self,
        spec: ActorSpec,
        seed: int,
        path: tuple[int, ...],
        envs: BatchVectorEnv | None = None,
        net: nn.Module | None = None,
    ) -> None:
        self.spec = spec
        self.rng = seeding.generator(seed, "explore", *path)
        self.net = net if net is not None else spec.policy.make_net()
        self.envs = envs or SerialVectorEnv([spec.env_fn] * spec.num_envs)
        policy = spec.policy
        self.nstep = NStepBuilder(
            spec.num_envs,
            spec.obs_shape,
            spec.n_step,
            spec.gamma,
            spec.obs_dtype,
            policy.action_shape,
            policy.action_dtype,
        )
        self.obs, _ = self.envs.reset(seed=seeding.env_seeds(seed, spec.num_envs, "env", *path))
        self.frames: FrameStepBuilder | None = None
        if spec.frame_stack:
            keep = spec.chunk_steps + spec.n_step + 2 if spec.priorities else 0
            self.frames = FrameStepBuilder(
                spec.num_envs, spec.obs_shape, spec.n_step, spec.gamma, spec.stream_base, keep
            )
            self.frames.reset(self.obs)
        self.steps = 0  # vector steps taken

    def sample(
        self, env_steps: Callable[[], int], every_step: Callable[[int], None] = lambda _: None
    ) -> tuple[Payload, list[float], float]:
        """One chunk: (its payload, returns of episodes that ended, seconds it took).
        `env_steps` reads the run's step count (epsilon, SAC's random phase);
        `every_step` is called with this actor's vector-step count after each step."""
        start, parts, returns = time.monotonic(), [], []
        policy = self.spec.policy
        for _ in range(self.spec.chunk_steps):
            actions = policy.act(self.net, self.obs, env_steps(), self.rng)
            next_obs, reward, term, trunc, infos = self.envs.step(actions)
            if self.frames is not None:
                self.frames.add(self.obs, actions, reward, next_obs, term, trunc)
            else:
                parts.append(self.nstep.add(self.obs, actions, reward, next_obs, term, trunc))
            if "episode" in infos:
                returns += infos["episode"]["r"][infos["_episode"]].tolist()
            self.obs = next_obs
            self.steps += 1
            every_step(self.steps)
        batch = self._payload(parts)
        return batch, returns, time.monotonic() - start

    def _payload(self, parts: list[Transitions]) -> Payload:
        """The chunk's transitions (or frames), with their first priorities if asked."""
        priorities = self.spec.policy.priorities
        if self.frames is not None:
            frames, obs_keys, next_keys = self.frames.chunk()
            if priorities is not None:
                frames.priority = priorities(
                    self.net,
                    self.frames.observations(obs_keys),
                    frames.action,
                    frames.ret,
                    self.frames.observations(next_keys),
                    frames.discount,
                )
            return frames
        batch = parts[0] if len(parts) == 1 else Transitions.concat(parts)
        if priorities is not None:
            batch.priority = priorities(
                self.net, batch.obs, batch.action, batch.ret, batch.next_obs, batch.discount
            )
        return batch

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
    seeding.seed_torch(seed, *path)
    arrays = shared.arrays
    sampler = ChunkSampler(spec, seed, path)
    weights = WeightReader(arrays)
    weights.refresh(sampler.net)

    def refresh(steps: int) -> None:
        if steps % spec.sync_every == 0:
            weights.refresh(sampler.net)

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
                slot,
                len(batch),
                sampler.env_steps_per_chunk,
                weights.version,
                returns,
                busy,
                frame_count(batch),
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
