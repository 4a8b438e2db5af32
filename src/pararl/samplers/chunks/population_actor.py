"""Acting for a population of off-policy agents in an actor process (`--seeds N
--mode async`): one process steps every agent's envs with its own CPU copy of the
population's Q-networks (`samplers.chunks.population`), while the learner process
updates them; each agent's transitions go to the learner in chunks through a
two-slot shared-memory outbox of its own (agent i's fields are named as actor i's
of an `ActorPool`, `samplers.chunks.actor`), and the stacked weights come back
through shared memory (`weights.shared`).

Protocol (actor -> learner): `(True, PopulationChunk)` when a slot of every agent's
outbox is filled; the learner answers `("ack", slot)` once it has copied every
agent's part, and `("close", None)` to stop. The actor waits for an ack when both
slots are full: the back-pressure of `ActorPool`'s actors.

One actor, not several: the population acts on all its agents' envs in one forward
pass, and on 2 cores the learner has the other. Each agent explores with its own
stream and its own epsilon schedule (of the run's env steps, which the learner
writes to shared memory), as in the serial loop; what differs from that loop is only
timing (how many updates behind the weights that acted are, `policy_lag`).
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from torch import nn

from pararl import seeding
from pararl.mp.outbox import handle_messages
from pararl.mp.procs import ParentWatch, ProcessGroup
from pararl.mp.shared import SharedArrays
from pararl.replay.frame_steps import frame_count
from pararl.samplers.chunks.actor import SLOTS, outbox_specs, read_slot, write_slot
from pararl.samplers.chunks.due import ChunksDue
from pararl.samplers.chunks.population import PopulationSampler
from pararl.samplers.chunks.sampler import ActorSpec, Payload
from pararl.samplers.chunks.source import Chunk
from pararl.vector import SerialVectorEnv
from pararl.weights.shared import WeightPublisher, WeightReader, weight_specs

READY_TIMEOUT_S = 120.0  # the actor builds every agent's envs and its networks first

Schedule = Callable[[int], float]  # an agent's epsilon at the run's env steps


@dataclass(frozen=True)
class PopulationChunk:
    """What travels with one chunk of every agent's transitions: `chunk` (its slot,
    the env steps each agent took, the weights version that acted, the seconds it
    took), each agent's transition and frame counts, and the infos of the vector
    steps in which episodes ended (every agent's envs, agent-major rows)."""

    chunk: Chunk
    counts: list[int]
    frames: list[int]
    episodes: list[dict[str, Any]]

    def agent(self, i: int) -> Chunk:
        """Agent i's part, as its own actor's chunk would say it."""
        return dataclasses.replace(self.chunk, count=self.counts[i], frames=self.frames[i])


def _ended(infos: dict[str, Any]) -> dict[str, Any] | None:
    """The part of a step's infos that says which episodes ended (None: none did)."""
    if "episode" not in infos or not infos["_episode"].any():
        return None
    return {"episode": infos["episode"], "_episode": infos["_episode"]}


def population_actor_main(
    conn: Connection,
    spec: ActorSpec,
    make_net: Callable[[], Any],
    schedules: Sequence[Schedule],
    shared: SharedArrays,
    seeds: Sequence[int],
    path: tuple[int, ...],
) -> None:
    """Act, chunk, send, repeat; until the learner says close or goes away."""
    seeding.seed_torch(seeds[0], *path)
    arrays, n = shared.arrays, len(seeds)
    net = make_net()
    envs = SerialVectorEnv([spec.env_fn] * (n * spec.num_envs))
    try:
        sampler = PopulationSampler(spec, envs, net, seeds, path)
        weights = WeightReader(arrays)
        weights.refresh(net.twin)
        watch, free, slot, steps = ParentWatch(), [True] * SLOTS, 0, 0
        episodes: list[dict[str, Any]] = []  # of the chunk being filled

        def record(infos: dict[str, Any]) -> None:
            ended = _ended(infos)
            if ended is not None:
                episodes.append(ended)

        conn.send((True, None))  # ready
        while True:
            start = time.monotonic()
            for _ in range(spec.chunk_steps):
                env_steps = int(arrays["env_steps"][0])
                sampler.step([schedule(env_steps) for schedule in schedules], record)
                steps += 1
                if steps % spec.sync_every == 0:
                    weights.refresh(net.twin)
            payloads = sampler.take()
            busy = time.monotonic() - start
            while not free[slot]:  # wait for the learner to take the older chunk
                if not handle_messages(conn, free, watch):
                    return
            for i, payload in enumerate(payloads):
                write_slot(arrays, i, slot, payload)
            free[slot] = False
            chunk = Chunk(slot, 0, spec.chunk_steps * spec.num_envs, weights.version, [], busy)
            counts, frames = [len(p) for p in payloads], [frame_count(p) for p in payloads]
            conn.send((True, PopulationChunk(chunk, counts, frames, episodes[:])))
            episodes.clear()
            slot = (slot + 1) % SLOTS
            if conn.poll(0) and not handle_messages(conn, free, watch):
                return
    finally:
        envs.close()


class PopulationActor:
    """The population's actor process and its shared memory (every agent's outbox,
    the published stacked weights). Its streams are named `(0, 0, start_steps)`
    under each agent's seed: a resumed run never replays an earlier one's envs or
    exploration."""

    def __init__(
        self,
        spec: ActorSpec,
        make_net: Callable[[], Any],
        schedules: Sequence[Schedule],
        twin: nn.Module,
        version: int,
        seeds: Sequence[int],
        start_steps: int,
    ) -> None:
        self.agents = len(seeds)
        arrays = weight_specs(twin)
        for i in range(self.agents):
            arrays.update(outbox_specs(i, spec))
        ctx = mp.get_context()
        self.shared = SharedArrays(arrays, ctx)
        self.arrays = self.shared.arrays
        self.set_env_steps(start_steps)
        self.publisher = WeightPublisher(self.arrays)
        self.publisher.publish(twin, version)
        args = (spec, make_net, list(schedules), self.shared, list(seeds), (0, 0, start_steps))
        self.group = ProcessGroup(population_actor_main, [args], ctx, name="pararl-actor")
        self.group.await_ready(READY_TIMEOUT_S)
        self.due = ChunksDue(self.group)

    @property
    def version(self) -> int:
        return self.publisher.version

    def publish(self, twin: nn.Module, version: int) -> None:
        self.publisher.publish(twin, version)

    def set_env_steps(self, env_steps: int) -> None:
        self.arrays["env_steps"][0] = env_steps

    def chunks(self, wait: float) -> Iterator[tuple[list[Payload], PopulationChunk]]:
        """Arrived chunks: every agent's payload (views of its outbox slot) and what
        came with them; the slot is acked (freed) once the caller asks for the next.
        A failed actor raises (`WorkerError`, with the env's index if an env failed)."""
        ready = self.group.ready([0], wait)
        self.due.check(ready)  # silent too long with a free slot: raised, with its stack
        for index in ready:
            message: PopulationChunk = self.group.receive(index)
            self.due.received(index)
            slot = message.chunk.slot
            yield (
                [read_slot(self.arrays, i, slot, message.agent(i)) for i in range(self.agents)],
                message,
            )
            self.group.send(index, ("ack", slot))
            self.due.acked(index)

    def close(self) -> None:
        self.group.close()


__all__ = ["PopulationActor", "PopulationChunk", "population_actor_main"]
