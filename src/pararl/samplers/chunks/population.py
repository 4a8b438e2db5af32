"""Acting for a population of off-policy agents (`--seeds`; in this process, or in the
actor process of `population_actor`): one vector env holds every agent's envs (agent
i's: the i-th block), the population acts on all of them in one forward pass
(`models.population.QPopulation`), and each agent's part of every step becomes that
agent's transitions, as its own `ChunkSampler` would have made them alone.

What makes agent i the agent its run alone trains: its envs are reset with the seeds
its run gives its envs (`env` of its seed, at the same path), its exploration draws
come from its own stream (`explore` of its seed, at the same path), and its
transitions are built by a builder of its own (n-step, or frame steps), in its envs'
order, so its replay memory receives what its run's would have, in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pararl import seeding
from pararl.envs.masks import batch_mask
from pararl.models.acting import Draws, Policy, PopulationDraws
from pararl.observations import take
from pararl.replay.frame_steps import FrameStepBuilder
from pararl.replay.nstep import NStepBuilder, Transitions
from pararl.samplers.chunks.sampler import ActorSpec, Payload
from pararl.vector.core import BatchVectorEnv


class PopulationSampler:
    """`spec`: one agent's actor (its envs: `spec.num_envs`); `envs`: every agent's,
    `len(seeds)` blocks of them; `policy`: the population's (agent-major rows);
    `path`: the streams' path, as a run's local actor names it."""

    def __init__(
        self,
        spec: ActorSpec,
        envs: BatchVectorEnv,
        policy: Policy,
        seeds: Sequence[int],
        path: tuple[int, ...],
    ) -> None:
        self.spec, self.envs, self.policy = spec, envs, policy
        self.agents, self.per = len(seeds), spec.num_envs
        if envs.num_envs != self.agents * self.per:
            raise ValueError(f"{len(seeds)} agents of {self.per} envs need as many envs in all")
        self.rngs = [seeding.generator(seed, "explore", *path) for seed in seeds]
        resets = [x for seed in seeds for x in seeding.env_seeds(seed, self.per, "env", *path)]
        self.obs, infos = envs.reset(seed=resets)
        self.mask = batch_mask(infos)  # the observations' action masks (None: no masks)
        self.builders: list[NStepBuilder | FrameStepBuilder]
        if spec.frame_stack:
            frames = [
                FrameStepBuilder(self.per, spec.obs_shape, spec.n_step, spec.gamma, 0, 0)
                for _ in seeds
            ]
            for i, builder in enumerate(frames):
                builder.reset(self.obs[self._rows(i)])
            self.builders = list(frames)
        else:
            action = spec.policy
            self.builders = [
                NStepBuilder(
                    self.per,
                    spec.obs_shape,
                    spec.n_step,
                    spec.gamma,
                    spec.obs_dtype,
                    action.action_shape,
                    action.action_dtype,
                    spec.mask_size,
                    spec.leaves,
                )
                for _ in seeds
            ]
        self.parts: list[list[Transitions]] = [[] for _ in seeds]  # since the last `take`
        self.first = np.ones(envs.num_envs, bool)
        # NEXT_STEP autoreset: the step after an episode's end returns its first obs
        self._ended = np.zeros(envs.num_envs, bool)

    def _rows(self, agent: int) -> slice:
        return slice(agent * self.per, (agent + 1) * self.per)

    def step(self, epsilons: Sequence[float], record: Callable[[dict[str, Any]], None]) -> None:
        """One vector step of every env, each agent exploring with its `epsilons[i]`;
        each agent's new transitions (or frames) wait in its builder for `take`.
        `record` is given the step's infos (the episodes that ended)."""
        draws = PopulationDraws(
            [Draws(rng, epsilon=eps) for rng, eps in zip(self.rngs, epsilons, strict=True)]
        )
        acted = self.policy.act(self.obs, None, self.first, "sampled", draws, self.mask)
        actions = acted.action
        next_obs, reward, term, trunc, infos = self.envs.step(actions)
        next_mask = batch_mask(infos)  # NEXT_STEP: an ended episode's last obs's mask
        self.first, self._ended = self._ended, term | trunc
        for i, builder in enumerate(self.builders):
            rows = self._rows(i)
            obs, next_i = take(self.obs, rows), take(next_obs, rows)
            if isinstance(builder, FrameStepBuilder):
                builder.add(obs, actions[rows], reward[rows], next_i, term[rows], trunc[rows])
                continue
            mask = None if next_mask is None else next_mask[rows]
            self.parts[i].append(
                builder.add(obs, actions[rows], reward[rows], next_i, term[rows], trunc[rows], mask)
            )
        record(infos)
        self.obs, self.mask = next_obs, next_mask

    def take(self) -> list[Payload]:
        """Every agent's transitions (or frames) since the last `take`, in the agents'
        order: what its own sampler's chunk of as many vector steps would hold."""
        out: list[Payload] = []
        for builder, parts in zip(self.builders, self.parts, strict=True):
            if isinstance(builder, FrameStepBuilder):
                out.append(builder.chunk()[0])
            else:
                out.append(parts[0] if len(parts) == 1 else Transitions.concat(parts))
                parts.clear()
        return out

    def close(self) -> None:
        self.envs.close()


__all__ = ["PopulationSampler"]
