"""The interface between off-policy acting and learning (DQN, SAC, TD3): chunks of
n-step transitions.

Every way of acting — in this process on a vector env (`samplers.chunks.local`), in actor
processes with shared-memory outboxes (`samplers.chunks.actor_pool`), in Ray actors
(`samplers.chunks.ray`) — is a `ChunkSource`. The learner loop (`runners.offpolicy`)
is the same for all of them: take chunks into the replay memory, learn, publish weights.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Protocol

from torch import nn

from pararl.replay.frame_steps import FrameSteps
from pararl.replay.nstep import Transitions


@dataclass(frozen=True)
class Chunk:
    """What travels with a chunk of transitions (the arrays go their own way)."""

    slot: int  # outbox slot of an actor process; -1 when the arrays came along
    count: int  # transitions in the chunk
    env_steps: int  # env steps it took
    version: int  # weights version that acted
    episode_returns: list[float]
    busy_s: float  # time spent acting (not waiting) since the last chunk
    frames: int = 0  # frames in the chunk, when it carries frames (`replay.frame_steps`)


class ChunkSource(Protocol):
    """Where the learner's chunks come from."""

    @property
    def num_actors(self) -> int:
        """Actors whose chunks arrive (1 for an in-process source)."""

    @property
    def version(self) -> int:
        """The weights version last published."""

    def chunks(
        self, wait: float
    ) -> Generator[tuple[int, Transitions | FrameSteps, Chunk], None, None]:
        """(actor index, payload, chunk) for the chunks that arrived within `wait`
        s; the transitions may be a view that is reused once the caller asks for
        the next item, so copy them first. A caller may stop early and close the
        iterator: the chunks not yet taken stay for the next call. Handles failed
        actors as configured."""

    def publish(self, net: nn.Module, version: int) -> None:
        """Make these weights the ones actors act with from now on."""

    def set_env_steps(self, env_steps: int) -> None:
        """The run's env-step count (actors' exploration follows it: DQN's epsilon
        schedule, SAC's random first steps)."""

    def close(self) -> None: ...


__all__ = ["Chunk", "ChunkSource"]
