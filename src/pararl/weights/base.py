"""The one interface for shipping weights from a learner to whatever acts with them.

After `publish(model, version)`, acting uses `model`'s weights: from its next step in
this process, from the next refresh of an actor process or a Ray actor. The version
(the learner's update count) travels with them, so an actor's chunks say which
weights acted and the learner can measure its policy lag. Implementations (the
shape of TorchRL's weight updaters: one sender, swappable transports):

- `local.LocalCopy`: acting in this process, on the learner's own network or a copy
  on another device (DQN's serial/sync sources, PPO's and MAML's acting copies);
- `shared.WeightPublisher`: actor processes, through a seqlock in shared memory
  (`shared.WeightReader` on their side);
- `ray.RayWeights`: Ray actors, one `ray.put` per version sent (`ray.RayReceiver`
  on their side);
- `averaging.AveragedWeights`: replicas that each learn, and meet to average.

Where weights leave the process as data (Ray's object store, the evaluation
process's pipe), they travel as a numpy snapshot (`numpy_state`, `load_numpy_state`):
no tensors pickled.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from torch import nn


class WeightSender(Protocol):
    """The learner's side of shipping weights (see the module docstring)."""

    @property
    def version(self) -> int:
        """The version published last (-1 before the first)."""

    def publish(self, model: nn.Module, version: int) -> None:
        """Make `model`'s weights, as version `version`, the ones acting uses."""


class Stateful(Protocol):
    """Anything with a torch state dict (a network, or what evaluations take)."""

    def state_dict(self) -> dict: ...


def numpy_state(model: Stateful) -> dict[str, np.ndarray]:
    """A CPU snapshot of `model`'s parameters and buffers, as numpy arrays."""
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def load_numpy_state(model: nn.Module, state: dict[str, np.ndarray]) -> None:
    """Load a snapshot from `numpy_state` (copied: the arrays may be read-only views,
    as Ray's object store gives them)."""
    model.load_state_dict({k: torch.tensor(v) for k, v in state.items()})


__all__ = ["Stateful", "WeightSender", "load_numpy_state", "numpy_state"]
