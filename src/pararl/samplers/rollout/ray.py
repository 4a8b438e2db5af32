"""PPO on Ray: actors that return rollout segments acted with the current weights,
and the pool that gathers one segment from each into one rollout per update.

A segment is what `samplers.rollout.collect` makes of `num_steps` steps of an
actor's envs (SAME_STEP autoreset): observations, actions, log-probs and values,
and advantages and returns by GAE — computed in the actor, per env, with the same
weights that acted — so the driver only concatenates segments.

PPO is on-policy, so this is synchronous: the driver waits for all segments of a
version. If an actor dies, the segments already received are kept and the lost one
is asked for again from the restarted actor, with the same weights.
"""

from __future__ import annotations

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
from pararl.observations import joined
from pararl.samplers.ray.cluster import connect, disconnect
from pararl.samplers.ray.pool import RayActorGroup
from pararl.samplers.rollout.collect import EnvStream, RolloutSpec, collect
from pararl.vector import SerialVectorEnv
from pararl.weights.ray import RayReceiver

WAIT_S = 1.0


@dataclass
class Segment:
    """One actor's share of a rollout, flattened to [num_steps * envs, ...]."""

    batch: dict[str, Any]  # "obs": Dict and Tuple observations, a dict of leaves
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
    ) -> None:
        one_thread()
        seeding.seed_torch(seed, *path)
        self.actor, self.spec = make_model(), spec
        fns = [
            env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)
        ] * cfg.envs_per_worker
        self.envs = SerialVectorEnv(fns, autoreset_mode="SameStep")
        obs, infos = self.envs.reset(seed=seeding.env_seeds(seed, len(fns), "env", *path))
        state = self.actor.initial_state(len(fns))
        self.stream = EnvStream.start(obs, spec.gamma, state, batch_mask(infos))
        self.weights = RayReceiver()

    def rollout(self, weights: list[Any], version: int) -> Segment:
        """`num_steps` steps of every env with weights `version`."""
        self.weights.refresh(self.actor, weights, version)
        episodes: list[dict[str, Any]] = []

        def keep(infos: dict[str, Any]) -> None:
            if "episode" in infos:
                episodes.append(infos)

        batch = collect(self.actor, self.spec, self.envs, self.stream, keep)
        return Segment(batch, len(batch["advantages"]), episodes, version)

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())


def _joined(parts: list[Any]) -> Any:
    """Segments' arrays end to end; dicts of leaves (Dict observations) leaf by leaf."""
    return joined(parts) if isinstance(parts[0], dict) else np.concatenate(parts)


class RayPPOPool:
    """PPO actors on Ray; `gather` returns the rollout of one weights version.
    Actor i's streams are `(i, 0, start_steps)` under the run's seed."""

    def __init__(
        self,
        make_model: Callable[[], ActorCritic],
        spec: RolloutSpec,
        cfg: RunConfig,
        num_actors: int,
        start_steps: int,
        report: Callable[[str], None],
    ) -> None:
        connect(cfg.ray_address, num_actors)
        try:
            self.group = RayActorGroup(
                PPOActor,
                lambda i: (make_model, spec, cfg, cfg.seed, (i, 0, start_steps)),
                num_actors,
                report,
                cfg.ray_timeout_s,
            )
        except BaseException:
            disconnect()
            raise
        self.received = 0  # env steps in segments received

    def gather(
        self, model: torch.nn.Module, version: int
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """One segment from every actor acted with `model` (weights `version`),
        concatenated in actor order; and the infos of the episodes that ended."""
        self.group.publish(model, version)
        for index in range(len(self.group)):
            self.group.submit(index, "rollout")
        segments: dict[int, Segment] = {}
        while len(segments) < len(self.group):
            for index, segment in self.group.results(WAIT_S):
                segments[index] = segment
                self.received += segment.env_steps
        ordered = [segments[i] for i in range(len(self.group))]
        batch = {k: _joined([s.batch[k] for s in ordered]) for k in ordered[0].batch}
        return batch, [info for s in ordered for info in s.episodes]

    def close(self) -> None:
        self.group.close()
        disconnect()


__all__ = ["PPOActor", "RayPPOPool", "Segment"]
