"""Acting in this process as a `ChunkSource`: the serial and sync modes of the
off-policy learners (DQN, SAC, TD3).

The same `ChunkSampler` as an actor process, over a vector env this process holds
(`SerialVectorEnv`, or `ParallelVectorEnv` whose workers step the envs), acting
with the learner's own acting network (Q-network, SAC's actor) when it is on the
CPU (or a CPU copy refreshed at each publication; or, with `--acting-lag`, a copy
that trails the learner by that many updates, as an async actor does). A chunk is
one vector step, so the learner loop alternates one step of every env with the
updates the replay ratio allows, as in the DQN, SAC and TD3 papers.
"""

from __future__ import annotations

from collections.abc import Generator

from torch import nn

from pararl.replay.frame_steps import frame_count
from pararl.samplers.chunks.sampler import ActorSpec, ChunkSampler, Payload
from pararl.samplers.chunks.source import Chunk
from pararl.vector.core import BatchVectorEnv
from pararl.weights.local import LocalCopy


class LocalChunkSource:
    """One in-process actor over `envs`; `net` is the network it acts with."""

    def __init__(
        self,
        spec: ActorSpec,
        envs: BatchVectorEnv,
        net: nn.Module,
        version: int,
        seed: int,
        path: tuple[int, ...],
        delay: int = 0,
    ) -> None:
        self.sampler = ChunkSampler(spec, seed, path, envs=envs, net=net)
        self.weights = LocalCopy(self.sampler.net, version, delay)
        self._env_steps = 0

    @property
    def num_actors(self) -> int:
        return 1

    @property
    def version(self) -> int:
        """The newest weights published (a chunk carries those it was acted with)."""
        return self.weights.newest

    def chunks(self, wait: float) -> Generator[tuple[int, Payload, Chunk], None, None]:
        """One vector step's transitions (never waits: acting is here)."""
        batch, returns, busy = self.sampler.sample(lambda: self._env_steps)
        steps = self.sampler.env_steps_per_chunk
        acted = self.weights.version
        chunk = Chunk(-1, len(batch), steps, acted, returns, busy, frame_count(batch))
        yield 0, batch, chunk

    def publish(self, net: nn.Module, version: int) -> None:
        self.weights.publish(net, version)  # learning on another device: the CPU copy too

    def set_env_steps(self, env_steps: int) -> None:
        self._env_steps = env_steps

    def close(self) -> None:
        self.sampler.close()


__all__ = ["LocalChunkSource"]
