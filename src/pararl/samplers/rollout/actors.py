"""Asynchronous PPO's actors: each steps its share of the envs with its own CPU copy of
the policy and collects rollout segments while the learner updates, the weights
trailing the learner by exactly `lag` rollouts.

    actor i, rollout j:  wait for weights version max(0, j - lag) (the ring holds it)
                         and a free outbox slot; act num_steps steps into the slot;
                         send (slot, j, version, busy and waiting seconds, episodes)
    learner:             take every actor's segment j (merged: a copy), ack the
                         slots, update, publish version j + 1

Version v is the weights learned from rollouts 0 .. v-1, so rollout j is collected
with version max(0, j - lag) and learned from by version j: the policy lag is
`lag` rollouts, exactly, for every rollout after the first `lag` (Cleanba's
scheme, Huang et al. 2023; Sample Factory's APPO bounds the lag instead and drops
older data). With lag 0 the actors wait for every update: the sync loop, in other
processes. Which version an actor acts with does not depend on timing, so a seeded
run is reproducible; `InlineActors`, the serial twin, runs the same actors in this
process, one after the other, and gives the same rollouts.

Each actor's outbox has lag + 1 slots (the segment being filled and those not yet
taken); the weights travel through a ring of lag + 1 versions (`weights.ring`). Only
slot numbers, versions and finished episodes' statistics travel on the pipes.

Protocol (actor -> learner): `(True, Segment)` when a slot is filled; the learner
sends `("ack", slot)` once it has copied the slot, `("version", v)` when it has
published a version, and `("close", None)` to stop.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from pararl import seeding
from pararl.envs.masks import batch_mask
from pararl.models import ActorCritic
from pararl.models.acting import Draws, PopulationDraws
from pararl.mp.errors import envs_from
from pararl.mp.outbox import handle_messages
from pararl.mp.procs import ParentWatch, ProcessGroup
from pararl.mp.shared import ArraySpec, SharedArrays, local_arrays
from pararl.samplers.rollout.collect import (
    EnvStream,
    Rollout,
    RolloutSpec,
    fill,
    merged,
    rollout_draws,
)
from pararl.samplers.rollout.collect import rollout_specs as segment_specs
from pararl.vector import SerialVectorEnv
from pararl.weights.ring import WeightRing, ring_specs

READY_TIMEOUT_S = 120.0  # an actor builds its envs and its policy copy before it says ready
SEGMENT_TIMEOUT_S = 600.0  # the longest a rollout segment may take to arrive


@dataclass(frozen=True)
class ActorPlan:
    """What every actor builds from: its policy copy, its envs, the rollout's shape,
    the vector envs' `shared_infos` (action masks), the lag, and the run's seed; a
    population's (`--seeds`, one actor stepping every agent's envs): its agents'
    seeds, each agent's actions drawn from the stream its run alone draws from."""

    make_model: Callable[[], ActorCritic]
    env_fn: Callable[[], gym.Env]
    spec: RolloutSpec
    shared_infos: dict[str, np.ndarray] | None
    lag: int
    seed: int
    agent_seeds: tuple[int, ...] = ()

    @property
    def slots(self) -> int:
        return self.lag + 1

    def draws(self, *path: int) -> Draws:
        """The streams of the actor at `path` (`rollout_draws`)."""
        if not self.agent_seeds:
            return rollout_draws(self.seed, *path)
        return PopulationDraws([rollout_draws(s, *path) for s in self.agent_seeds])


@dataclass(frozen=True)
class Segment:
    """An actor's message: the outbox slot of rollout `rollout`, the weights version it
    acted with, how long it acted and how long it waited before, and the episodes that
    ended in it (`RecordEpisodeStatistics` infos)."""

    slot: int
    rollout: int
    version: int
    busy_s: float
    waited_s: float
    episodes: list[dict[str, Any]]


class SegmentActor:
    """One actor's envs (in this process, `SerialVectorEnv`), policy copy, stream and
    draws; `collect` acts one rollout segment into given arrays."""

    def __init__(self, plan: ActorPlan, env_seeds: list[int], path: tuple[int, ...]) -> None:
        self.plan, n = plan, len(env_seeds)
        self.model = plan.make_model()
        self.envs = SerialVectorEnv(
            [plan.env_fn] * n, autoreset_mode="SameStep", shared_infos=plan.shared_infos
        )
        obs, infos = self.envs.reset(seed=env_seeds)
        self.stream = EnvStream.start(
            obs, plan.spec.gamma, self.model.initial_state(n), batch_mask(infos)
        )
        self.draws = plan.draws(*path)
        self.num_envs = n

    def collect(self, arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
        """One segment into `arrays` (`rollout_specs`); the episodes that ended in it."""
        episodes: list[dict[str, Any]] = []

        def keep(infos: dict[str, Any]) -> None:
            if "episode" in infos:
                episodes.append(infos)

        rollout = Rollout(
            self.model, self.plan.spec, self.num_envs, self.stream.returns, self.draws, arrays
        )
        with torch.no_grad():
            fill(rollout, self.envs, self.stream, keep)
            rollout.close(self.stream)
        return episodes

    def close(self) -> None:
        self.envs.close()


def outbox_specs(plan: ActorPlan, index: int, num_envs: int) -> dict[str, ArraySpec]:
    """Actor `index`'s outbox: `plan.slots` segments of `num_envs` envs."""
    return {
        f"a{index}.{slot}.{key}": value
        for slot in range(plan.slots)
        for key, value in segment_specs(plan.spec, num_envs).items()
    }


def slot_views(arrays: dict[str, np.ndarray], index: int, slot: int) -> dict[str, np.ndarray]:
    prefix = f"a{index}.{slot}."
    return {k.removeprefix(prefix): v for k, v in arrays.items() if k.startswith(prefix)}


def actor_main(
    conn: Connection,
    index: int,
    plan: ActorPlan,
    shared: SharedArrays,
    env_seeds: list[int],
    path: tuple[int, ...],
) -> None:
    """Wait for the version and a slot, collect, send; until the learner says close
    or goes away (an env's failure names the run's env: actor i steps the i-th block
    of `len(env_seeds)`)."""
    with envs_from(index * len(env_seeds)):
        seeding.seed_torch(plan.seed, *path)
        arrays, ring = shared.arrays, WeightRing(shared.arrays)
        actor = SegmentActor(plan, env_seeds, path)
        watch, free = ParentWatch(), [True] * plan.slots
        conn.send((True, None))  # ready
        rollout = slot = 0
        try:
            while True:
                version, start = max(0, rollout - plan.lag), time.perf_counter()
                while not (free[slot] and ring.holds(version)):
                    if not handle_messages(conn, free, watch):
                        return
                if not ring.load(actor.model, version):
                    raise RuntimeError(
                        f"weights version {version} was overwritten before it was read"
                    )
                acting = time.perf_counter()
                episodes = actor.collect(slot_views(arrays, index, slot))
                busy = time.perf_counter() - acting
                free[slot] = False
                conn.send((True, Segment(slot, rollout, version, busy, acting - start, episodes)))
                rollout, slot = rollout + 1, (slot + 1) % plan.slots
        finally:
            actor.close()


@dataclass(frozen=True)
class Taken:
    """One rollout from every actor: its arrays side by side (`merged`), the weights
    version that acted, the actors' mean busy fraction over it (NaN: not measured),
    and the episodes that ended in it."""

    arrays: dict[str, np.ndarray]
    version: int
    busy: float
    episodes: list[dict[str, Any]]

    @classmethod
    def of(cls, arrays: dict[str, np.ndarray], segments: list[Segment]) -> Taken:
        busy = [s.busy_s / max(s.busy_s + s.waited_s, 1e-9) for s in segments]
        episodes = [info for s in segments for info in s.episodes]
        return cls(arrays, segments[0].version, float(np.mean(busy)), episodes)


class RolloutActors:
    """The actor processes and their shared memory (outboxes and the weight ring).
    Actor i's streams are named `(i, 0, start_steps)` under the run's seed
    (`pararl.seeding`), and it steps envs i * per_actor .. of the run's seeds."""

    def __init__(
        self,
        plan: ActorPlan,
        num_actors: int,
        env_seeds: list[int],
        model: nn.Module,
        start_steps: int,
        segment_timeout_s: float = SEGMENT_TIMEOUT_S,
    ) -> None:
        if len(env_seeds) % num_actors:
            raise ValueError(f"{len(env_seeds)} envs do not split over {num_actors} actors")
        per = len(env_seeds) // num_actors
        specs = ring_specs(model, plan.slots)
        for i in range(num_actors):
            specs |= outbox_specs(plan, i, per)
        ctx = mp.get_context()
        self.shared = SharedArrays(specs, ctx)
        self.arrays = self.shared.arrays
        self.ring = WeightRing.holding(self.arrays, model)
        self.next, self.timeout_s, self.lag = 0, segment_timeout_s, plan.lag
        args = [
            (i, plan, self.shared, env_seeds[i * per : (i + 1) * per], (i, 0, start_steps))
            for i in range(num_actors)
        ]
        self.group = ProcessGroup(actor_main, args, ctx, name="pararl-rollout-actor")
        self.group.await_ready(READY_TIMEOUT_S)

    @property
    def num_actors(self) -> int:
        return len(self.group)

    def take(self) -> Taken:
        """Every actor's segment of the next rollout, merged (a copy); their slots are
        freed. A failed or dead actor raises `WorkerError` with its index."""
        late = "sent no rollout segment in {timeout} s (an env step hangs, or is that slow)"
        segments: list[Segment] = self.group.gather(range(len(self.group)), self.timeout_s, late)
        for s in segments:
            if (s.rollout, s.version) != (self.next, max(0, self.next - self.lag)):
                raise RuntimeError(
                    f"expected rollout {self.next} of version {max(0, self.next - self.lag)}, "
                    f"an actor sent rollout {s.rollout} of version {s.version}"
                )
        arrays = merged([slot_views(self.arrays, i, s.slot) for i, s in enumerate(segments)])
        for i, s in enumerate(segments):
            self.group.send(i, ("ack", s.slot))
        self.next += 1
        return Taken.of(arrays, segments)

    def publish(self, model: nn.Module, version: int) -> None:
        """Weights `version` (learned from rollouts 0 .. version-1) to the actors."""
        self.ring.publish(model, version)
        for i in range(len(self.group)):
            self.group.send(i, ("version", version))

    def idle(self) -> bool:
        """While the learner updates on the rollout just taken, whether every actor
        waits for weights, acting nothing: with lag 0 always (the next rollout needs
        the version being learned); with lag 1 once each has sent its next segment
        (the one after needs that version too); with a longer lag an actor that sent
        one may be acting the next, which the pipe does not tell, so never. A dead
        actor raises `WorkerError` with its index."""
        if self.lag == 0:
            return True
        n = len(self.group)
        return self.lag == 1 and len(self.group.ready(range(n), 0)) == n

    def close(self) -> None:
        self.group.close()


class InlineActors:
    """The serial twin of `RolloutActors`: the same actors in this process, each
    collecting its segment when the learner asks, with the same weights versions
    (from a ring of local arrays)."""

    def __init__(
        self,
        plan: ActorPlan,
        num_actors: int,
        env_seeds: list[int],
        model: nn.Module,
        start_steps: int,
    ) -> None:
        per = len(env_seeds) // num_actors
        self.plan = plan
        self.ring = WeightRing.holding(local_arrays(ring_specs(model, plan.slots)), model)
        self.actors = [
            SegmentActor(plan, env_seeds[i * per : (i + 1) * per], (i, 0, start_steps))
            for i in range(num_actors)
        ]
        self.storage = [local_arrays(segment_specs(plan.spec, per)) for _ in self.actors]
        self.next = 0

    @property
    def num_actors(self) -> int:
        return len(self.actors)

    def take(self) -> Taken:
        version, segments = max(0, self.next - self.plan.lag), []
        for actor, arrays in zip(self.actors, self.storage, strict=True):
            if not self.ring.load(actor.model, version):
                raise RuntimeError(f"weights version {version} is not in the ring")
            start = time.perf_counter()
            episodes = actor.collect(arrays)
            segments.append(
                Segment(0, self.next, version, time.perf_counter() - start, 0.0, episodes)
            )
        self.next += 1
        return Taken.of(merged(self.storage), segments)

    def publish(self, model: nn.Module, version: int) -> None:
        self.ring.publish(model, version)

    def idle(self) -> bool:
        """Always: these actors act only inside `take`."""
        return True

    def close(self) -> None:
        for actor in self.actors:
            actor.close()


__all__ = [
    "ActorPlan",
    "InlineActors",
    "RolloutActors",
    "Segment",
    "SegmentActor",
    "Taken",
]
