"""The acting half of every off-policy actor (DQN, SAC, TD3), whatever carries its chunks:
`ActorSpec` (everything an actor needs, picklable) and `ChunkSampler`, which steps a
vector env with the acting network as the spec's `ActingPolicy` says and hands out
n-step transitions (or, for stacked frames, each new frame once) in chunks. Actor
processes (`actor`), Ray actors (`ray`) and this process (`local`) all sample
through it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from torch import nn

from pararl import seeding
from pararl.envs.masks import batch_mask
from pararl.models.acting import Policy
from pararl.observations import Leaf
from pararl.replay.frame_steps import FrameStepBuilder, FrameSteps
from pararl.replay.nstep import NStepBuilder, Transitions
from pararl.samplers.chunks.explore import ActingPolicy
from pararl.vector import SerialVectorEnv
from pararl.vector.core import BatchVectorEnv


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
    mask_size: int = 0  # > 0: the env gives action masks (`envs.masks`)
    leaves: tuple[Leaf, ...] = ()  # Dict and Tuple observations: carried leaf by leaf

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
            spec.mask_size,
            spec.leaves,
        )
        seeds = seeding.env_seeds(seed, spec.num_envs, "env", *path)
        self.obs, infos = self.envs.reset(seed=seeds)
        self.mask = batch_mask(infos)  # the observations' action masks (None: no masks)
        self.frames: FrameStepBuilder | None = None
        if spec.frame_stack:
            keep = spec.chunk_steps + spec.n_step + 2 if spec.priorities else 0
            self.frames = FrameStepBuilder(
                spec.num_envs, spec.obs_shape, spec.n_step, spec.gamma, spec.stream_base, keep
            )
            self.frames.reset(self.obs)
        self.steps = 0  # vector steps taken
        # what the acting network carries between steps, and where episodes start
        assert isinstance(self.net, Policy)
        self.state = self.net.initial_state(spec.num_envs)
        self.first = np.ones(spec.num_envs, bool)
        # NEXT_STEP autoreset: the step after an episode's end returns its first obs
        self._ended = np.zeros(spec.num_envs, bool)

    def sample(
        self, env_steps: Callable[[], int], every_step: Callable[[int], None] = lambda _: None
    ) -> tuple[Payload, list[float], float]:
        """One chunk: (its payload, returns of episodes that ended, seconds it took).
        `env_steps` reads the run's step count (epsilon, the uniform first steps);
        `every_step` is called with this actor's vector-step count after each step."""
        start, parts, returns = time.monotonic(), [], []
        policy = self.spec.policy
        for _ in range(self.spec.chunk_steps):
            acted = policy.act(
                self.net, self.obs, self.state, self.first, env_steps(), self.rng, self.mask
            )
            actions, self.state = acted.action, acted.state
            next_obs, reward, term, trunc, infos = self.envs.step(actions)
            # NEXT_STEP: an ended episode's true last observation, and its mask
            next_mask = batch_mask(infos)
            self.first, self._ended = self._ended, term | trunc
            if self.frames is not None:
                self.frames.add(self.obs, actions, reward, next_obs, term, trunc)
            else:
                step = (self.obs, actions, reward, next_obs, term, trunc, next_mask)
                parts.append(self.nstep.add(*step))
            if "episode" in infos:
                returns += infos["episode"]["r"][infos["_episode"]].tolist()
            self.obs, self.mask = next_obs, next_mask
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
                    None,  # no masks with stacked frames (`algos.dqn`)
                )
            return frames
        batch = parts[0] if len(parts) == 1 else Transitions.concat(parts)
        if priorities is not None:
            batch.priority = priorities(
                self.net,
                batch.obs,
                batch.action,
                batch.ret,
                batch.next_obs,
                batch.discount,
                batch.next_mask,
            )
        return batch

    @property
    def env_steps_per_chunk(self) -> int:
        return self.spec.chunk_steps * self.spec.num_envs

    def close(self) -> None:
        self.envs.close()


__all__ = ["ActorSpec", "ChunkSampler", "Payload"]
