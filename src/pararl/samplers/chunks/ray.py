"""Off-policy learning (DQN, SAC, TD3) on Ray: actors that act and return chunks of n-step
transitions through the object store, and the pool the learner loop takes them from
(a `ChunkSource`).

An actor is the local actor's `ChunkSampler` behind a Ray method instead of a pipe
and a shared-memory outbox: each `sample` call returns one chunk (numpy arrays,
which the object store passes without copying on the driver's node), and carries
the newest weights reference, fetched only when its version is new. Weights
therefore change between chunks, not every `sync_every` steps as in local actors.

Each actor has two `sample` requests in flight, like the local actors' two outbox
slots: it acts on the next chunk while the learner takes the last one, and no
more — a new request goes out only when a chunk is taken, which is the same
back-pressure that keeps sampling matched to learning under the replay ratio.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from torch import nn

from pararl import seeding
from pararl.config import RunConfig
from pararl.mp.threads import one_thread
from pararl.replay.frame_steps import frame_count
from pararl.samplers.chunks.sampler import ActorSpec, ChunkSampler, Payload
from pararl.samplers.chunks.source import Chunk
from pararl.samplers.ray.cluster import connect, disconnect
from pararl.samplers.ray.pool import RayActorGroup, streams_path
from pararl.weights.ray import RayReceiver

IN_FLIGHT = 2  # sample requests per actor (double-buffered, as the local outbox)


class ChunkActor:
    """Made in its own Ray worker process (one CPU); see the module docstring."""

    def __init__(self, spec: ActorSpec, seed: int, path: tuple[int, ...]) -> None:
        one_thread()  # one core per actor, as the local actors
        path = streams_path(path)  # a new one after a restart
        seeding.seed_torch(seed, *path)
        self.sampler = ChunkSampler(spec, seed, path)
        self.weights = RayReceiver()

    def sample(self, weights: list[Any], version: int, env_steps: int) -> tuple[Payload, Chunk]:
        """One chunk acted with weights `version`; `env_steps` (the run's count when
        the request was sent) sets the exploration (epsilon, the uniform first steps)."""
        self.weights.refresh(self.sampler.net, weights, version)
        batch, returns, busy = self.sampler.sample(lambda: env_steps)
        steps = self.sampler.env_steps_per_chunk
        chunk = Chunk(-1, len(batch), steps, version, returns, busy, frame_count(batch))
        return batch, chunk

    def node(self) -> str:
        """The id of the Ray node this actor runs on (placement checks)."""
        import ray

        return str(ray.get_runtime_context().get_node_id())


class RayChunkPool:
    """Off-policy actors on Ray; the learner takes their chunks and publishes weights here.
    Actor i's streams are `(i, 0, start_steps)` under the run's seed."""

    # Transitions per chunk: twice the local actors' (a Ray call costs about 1 ms, a
    # shared-memory slot microseconds), so weights change every 512 / envs vector steps.
    CHUNK_TRANSITIONS = 512

    def __init__(
        self,
        specs: list[ActorSpec],
        net: nn.Module,
        version: int,
        cfg: RunConfig,
        start_steps: int,
        report: Callable[[str], None] = print,
    ) -> None:
        connect(cfg.ray_address, len(specs))
        try:
            self.group = RayActorGroup(
                ChunkActor,
                lambda i: (specs[i], cfg.seed, (i, 0, start_steps)),
                len(specs),
                report,
                cfg.ray_timeout_s,
            )
        except BaseException:
            disconnect()
            raise
        self.env_steps = start_steps
        self.received = 0  # transitions handed to the learner
        self._held: list[tuple[int, Any]] = []  # arrived, not yet taken (`chunks`)
        self.publish(net, version)
        for index in range(len(specs)):
            for _ in range(IN_FLIGHT):
                self.group.submit(index, "sample", self.env_steps)

    @property
    def num_actors(self) -> int:
        return len(self.group)

    @property
    def version(self) -> int:
        return self.group.version

    def publish(self, net: nn.Module, version: int) -> None:
        self.group.publish(net, version)

    def set_env_steps(self, env_steps: int) -> None:
        self.env_steps = env_steps

    def chunks(self, wait: float) -> Generator[tuple[int, Payload, Chunk], None, None]:
        """Chunks that arrived within `wait` s (first those that arrived before and
        were not taken); each taken one is replaced by a new request to its actor,
        sent with the newest weights. A caller that stops asking (closes this
        generator) leaves the rest for the next call."""
        arrived = self._held or list(self.group.results(wait))
        self._held = []
        for k, (index, (batch, chunk)) in enumerate(arrived):
            self.received += len(batch)
            try:
                yield index, batch, chunk
            except GeneratorExit:
                self._held = arrived[k + 1 :]
                raise
            finally:
                self.group.submit(index, "sample", self.env_steps)

    def close(self) -> None:
        self.group.close()
        disconnect()


__all__ = ["ChunkActor", "RayChunkPool"]
