"""PPO on Ray: actors that return rollout segments acted with the weights they were
sent, and the pool that gathers one segment from each into one rollout per update.

A segment is the arrays of `num_steps` steps of an actor's envs (SAME_STEP
autoreset; `samplers.rollout.collect.rollout_specs`: observations, actions,
log-probs and values, rewards, ends, the values of the observations after its last
step); the driver sets the actors' segments side by side (`merged`) and computes
GAE (or V-trace) on the whole rollout, as the other modes do.

Requests are queued per actor and answered in order. Synchronous (`gather`): one
request per version, and the driver waits for it. Asynchronous (`--mode async`):
rollout j is requested with the weights of version max(0, j - lag) — the first
lag + 1 at the start, then one as each version is published — so the actors
collect the next rollouts while the driver updates, exactly `lag` rollouts behind.
If an actor dies, the segments already received are kept and the lost ones are
asked for again from the restarted actor, with the newest weights.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pararl import seeding
from pararl.config import RunConfig
from pararl.envs.make import env_factory
from pararl.envs.masks import batch_mask
from pararl.models import ActorCritic
from pararl.mp.threads import one_thread
from pararl.samplers.ray.cluster import connect, disconnect
from pararl.samplers.ray.pool import RayActorGroup, streams_path
from pararl.samplers.rollout.actors import Taken
from pararl.samplers.rollout.collect import (
    EnvStream,
    Rollout,
    RolloutSpec,
    fill,
    merged,
    rollout_draws,
)
from pararl.vector import SerialVectorEnv
from pararl.weights.ray import RayReceiver

WAIT_S = 1.0


@dataclass
class Segment:
    """One actor's share of a rollout: its arrays ([num_steps, envs, ...] per step,
    `rollout_specs`), the episodes that ended in it, the weights version that acted."""

    arrays: dict[str, np.ndarray]
    env_steps: int
    episodes: list[dict[str, Any]]  # `final_info` dicts of steps where episodes ended
    version: int


class PPOActor:
    """Made in its own Ray worker process (one CPU); see the module docstring."""

    def __init__(
        self,
        make_model: Callable[[], ActorCritic],
        spec: RolloutSpec,
        cfg: RunConfig,
        seed: int,
        path: tuple[int, ...],
        shared_infos: dict[str, np.ndarray] | None = None,
    ) -> None:
        one_thread()
        path = streams_path(path)  # a new one after a restart
        seeding.seed_torch(seed, *path)
        self.actor, self.spec = make_model(), spec
        fns = [
            env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)
        ] * cfg.envs_per_worker
        self.envs = SerialVectorEnv(fns, autoreset_mode="SameStep", shared_infos=shared_infos)
        obs, infos = self.envs.reset(seed=seeding.env_seeds(seed, len(fns), "env", *path))
        state = self.actor.initial_state(len(fns))
        self.stream = EnvStream.start(obs, spec.gamma, state, batch_mask(infos))
        self.weights = RayReceiver()
        self.draws = rollout_draws(seed, *path)

    def rollout(self, weights: list[Any], version: int) -> Segment:
        """`num_steps` steps of every env with weights `version`."""
        self.weights.refresh(self.actor, weights, version)
        episodes: list[dict[str, Any]] = []

        def keep(infos: dict[str, Any]) -> None:
            if "episode" in infos:
                episodes.append(infos)

        n = self.envs.num_envs
        rollout = Rollout(self.actor, self.spec, n, self.stream.returns, self.draws)
        with torch.no_grad():
            fill(rollout, self.envs, self.stream, keep)
            rollout.close(self.stream)
        return Segment(rollout.arrays, n * self.spec.num_steps, episodes, version)

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())


class RayPPOPool:
    """PPO actors on Ray (see the module docstring). Actor i's streams are
    `(i, 0, start_steps)` under the run's seed."""

    def __init__(
        self,
        make_model: Callable[[], ActorCritic],
        spec: RolloutSpec,
        cfg: RunConfig,
        num_actors: int,
        start_steps: int,
        report: Callable[[str], None],
        shared_infos: dict[str, np.ndarray] | None = None,
    ) -> None:
        connect(cfg.ray_address, num_actors)
        try:
            self.group = RayActorGroup(
                PPOActor,
                lambda i: (make_model, spec, cfg, cfg.seed, (i, 0, start_steps), shared_infos),
                num_actors,
                report,
                cfg.ray_timeout_s,
            )
        except BaseException:
            disconnect()
            raise
        self.received = 0  # env steps in segments received
        self.queues: list[deque[Segment]] = [deque() for _ in range(num_actors)]

    def request(self, model: torch.nn.Module, version: int) -> None:
        """Ask every actor for its next segment, acted with `model` as `version`."""
        self.group.publish(model, version)
        for index in range(len(self.group)):
            self.group.submit(index, "rollout")

    def receive(self) -> tuple[dict[str, np.ndarray], list[dict[str, Any]], int]:
        """The oldest rollout requested and not yet received: every actor's segment side
        by side (`merged`), the infos of the episodes that ended in it, and the version
        that acted (the oldest of its segments')."""
        while not all(self.queues):
            for index, segment in self.group.results(WAIT_S):
                self.queues[index].append(segment)
                self.received += segment.env_steps
        ordered = [queue.popleft() for queue in self.queues]
        episodes = [info for s in ordered for info in s.episodes]
        return merged([s.arrays for s in ordered]), episodes, min(s.version for s in ordered)

    def gather(
        self, model: torch.nn.Module, version: int
    ) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
        """One rollout acted with `model` (weights `version`): synchronous PPO."""
        self.request(model, version)
        arrays, episodes, _ = self.receive()
        return arrays, episodes

    def close(self) -> None:
        self.group.close()
        disconnect()


class RayRollouts:
    """Asynchronous PPO's rollouts from `pool`: rollout j acted with version
    max(0, j - lag), as `samplers.rollout.actors.RolloutActors` gives them."""

    def __init__(self, pool: RayPPOPool, model: torch.nn.Module, lag: int) -> None:
        self.pool, self.lag = pool, lag
        for _ in range(lag + 1):  # rollouts 0 .. lag, all of version 0
            pool.request(model, 0)

    def take(self) -> Taken:
        arrays, episodes, version = self.pool.receive()
        return Taken(arrays, version, float("nan"), episodes)

    def publish(self, model: torch.nn.Module, version: int) -> None:
        """Version `version` is learned: ask for rollout version + lag with it."""
        self.pool.request(model, version)

    def idle(self) -> bool:
        """Never: where Ray placed its actors, and whether they act now, is not known
        here, so the update keeps its own threads."""
        return False

    def close(self) -> None:
        self.pool.close()


__all__ = ["PPOActor", "RayPPOPool", "RayRollouts", "Segment"]
