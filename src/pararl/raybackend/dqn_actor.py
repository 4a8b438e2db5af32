"""The DQN Ray actor: a batch of envs and a CPU Q-network copy acting epsilon-greedy,
returning chunks of n-step transitions through the object store.

It is the local actor's `ChunkSampler` behind a Ray method instead of a pipe and a
shared-memory outbox: each `sample` call returns one chunk (numpy arrays, which the
object store passes without copying on the driver's node), and carries the newest
weights reference, fetched only when its version is new. Weights therefore change
between chunks, not every `sync_every` steps as in the local actors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from pararl.replay import Transitions
from pararl.samplers.dqn_actor import ActorSpec, Chunk, ChunkSampler


def load_numpy_state(model: torch.nn.Module, state: dict[str, np.ndarray]) -> None:
    """Load a state dict of numpy arrays (read-only views of the object store)."""
    model.load_state_dict({k: torch.tensor(v) for k, v in state.items()})


def numpy_state(model: torch.nn.Module) -> dict[str, np.ndarray]:
    """A CPU snapshot of `model`'s parameters and buffers, as numpy arrays."""
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


class DQNActor:
    """Made in its own Ray worker process (one CPU); see the module docstring."""

    def __init__(self, spec: ActorSpec, seed: int) -> None:
        torch.set_num_threads(1)  # one core per actor, as the local actors
        self.sampler = ChunkSampler(spec, seed)
        self.version = -1

    def sample(self, weights: list[Any], version: int, env_steps: int) -> tuple[Transitions, Chunk]:
        """One chunk acted with weights `version`; `env_steps` (the run's count when
        the request was sent) sets epsilon."""
        if version != self.version:
            import ray

            load_numpy_state(self.sampler.q, ray.get(weights[0]))
            self.version = version
        batch, returns, busy = self.sampler.sample(lambda: env_steps)
        chunk = Chunk(-1, len(batch), self.sampler.env_steps_per_chunk, version, returns, busy)
        return batch, chunk

    def node(self) -> str:
        """The id of the Ray node this actor runs on (placement checks)."""
        import ray

        return str(ray.get_runtime_context().get_node_id())
