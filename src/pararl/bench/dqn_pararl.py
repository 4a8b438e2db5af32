"""pararl's async DQN (actor processes + the learner) driven for timed spells, for
`pararl bench dqn`'s throughput and overlap parts.

It drives pararl's own production loop — `AsyncDQN` (actor processes, shared-memory
outboxes, published weights, learner + replay) — without the run session (no
evaluation, checkpoints or logs), in four modes:

- `actors`: the actors alone; chunks are taken into the replay and acked, no learning;
- `learner`: the learner alone (gradient updates on the replay, weights published
  every `PUBLISH_EVERY` updates, as `run_async` does); the actors sit idle;
- `ratio`: `run_async`'s loop: learn as the replay ratio allows, take chunks when
  learning has caught up (the real async run);
- `free`: both flat out: take whatever chunks have arrived, then learn, repeat.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from pararl.bench import seed_dqn
from pararl.bench.common import progress
from pararl.config import DQNConfig
from pararl.envs.make import env_factory
from pararl.models import num_params
from pararl.runners.dqn import DQNState
from pararl.runners.dqn_async import PUBLISH_EVERY, AsyncDQN, ChunkSource
from pararl.runners.setup import resolve_device, seed_everything, set_learner_threads

Workload = Literal["seed", "defaults"]
Mode = Literal["actors", "learner", "ratio", "free"]
TAKE_WAIT_S = 0.05  # longest wait for a chunk inside a timed spell


def workload_config(workload: Workload, env: str = "CartPole-v1", seed: int = 0) -> DQNConfig:
    """`defaults`: pararl's DQN defaults. `seed`: the seed post's learning work per
    transition (its net, batch 64, lr 0.01, gamma 0.9, 1-step targets, target sync
    every 200 updates, one update per 5 transitions, epsilon 0.1, its reward shaping)
    on pararl's machinery: each actor steps a batch of 32 envs (the seed's actors step
    one), chunks of transitions, weights through shared memory."""
    base = DQNConfig(env=env, seed=seed, progress="none", tensorboard=False)
    if workload == "defaults":
        return base
    return dataclasses.replace(
        base,
        wrapper="cartpole-shaped",
        hidden=(20, 10),
        lr=seed_dqn.LR,
        gamma=seed_dqn.GAMMA,
        buffer_size=seed_dqn.MEMORY_CAPACITY,
        batch_size=seed_dqn.BATCH,
        learning_starts=seed_dqn.MEMORY_CAPACITY,
        replay_ratio=1 / seed_dqn.LEARN_EVERY,
        n_step=1,
        double_dqn=False,
        target_update=seed_dqn.TARGET_SYNC,
        eps_start=1 - seed_dqn.GREEDY,
        eps_end=1 - seed_dqn.GREEDY,
        envs_per_worker=32,
    )


def make_state(config: DQNConfig) -> DQNState:
    """A learner and replay memory as `train_dqn` builds them, without a run dir."""
    config.validate()
    env = env_factory(config.env, config.wrapper)()
    obs_space, act_space = env.observation_space, env.action_space
    env.close()
    return DQNState(config, obs_space, act_space, resolve_device(config.device))


@dataclass(frozen=True)
class Spell:
    """What one timed spell did."""

    env_steps: int
    updates: int
    seconds: float

    @property
    def steps_per_s(self) -> float:
        return self.env_steps / self.seconds

    @property
    def updates_per_s(self) -> float:
        return self.updates / self.seconds


class PararlAsync:
    """pararl's production async learner (`AsyncDQN`, with its `ActorPool`), driven
    in timed spells."""

    def __init__(
        self,
        config: DQNConfig,
        num_actors: int,
        learner_threads: int | None = None,
        fill_timeout_s: float = 120.0,
        source: Callable[[DQNState], ChunkSource] | None = None,
    ) -> None:
        """`source` makes the actors (default: local actor processes; `pararl bench
        ray` passes Ray actors)."""
        seed_everything(config.seed)
        self.config = config
        self.state = make_state(config)
        if learner_threads is None:  # as `pararl train` chooses
            set_learner_threads(num_params(self.state.learner.q), num_actors)
        else:
            torch.set_num_threads(learner_threads)
        pool = None if source is None else source(self.state)
        self.loop = AsyncDQN(self.state, num_actors, progress, pool)
        try:
            self._fill(fill_timeout_s)
        except BaseException:
            self.loop.close()
            raise

    def _fill(self, timeout_s: float) -> None:
        """Actors alone until the replay holds enough to learn from."""
        need = max(self.config.batch_size, self.config.learning_starts)
        deadline = time.monotonic() + timeout_s
        while len(self.state.replay) < need:
            if time.monotonic() > deadline:
                raise TimeoutError(f"replay not filled to {need} in {timeout_s} s")
            self.loop.take(0.5)

    def _iterate(self, mode: Mode, left: float) -> None:
        if mode == "actors":
            self.loop.take(max(0.0, min(TAKE_WAIT_S, left)))
        elif mode == "learner":
            self.loop.learn(PUBLISH_EVERY)
        else:  # the production loop, one turn at a time, with or without the ratio
            self.loop.iterate(free=mode == "free")

    def run(self, mode: Mode, seconds: float, warmup_s: float) -> Spell:
        """`warmup_s` untimed, then `seconds` timed, in `mode`."""
        if mode == "ratio":  # the ratio counts from here, not from the other spells
            self.state.restart_ratio()
        end = time.perf_counter() + warmup_s
        while (left := end - time.perf_counter()) > 0:
            self._iterate(mode, left)
        steps0, updates0 = self.state.env_steps, self.state.learner.updates
        start = time.perf_counter()
        end = start + seconds
        while (left := end - time.perf_counter()) > 0:
            self._iterate(mode, left)
        elapsed = time.perf_counter() - start
        return Spell(self.state.env_steps - steps0, self.state.learner.updates - updates0, elapsed)

    def close(self) -> None:
        self.loop.close()
