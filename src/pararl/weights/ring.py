"""Weights by version, for actors that must act with one exact version: a ring of
`slots` whole state dicts (parameters and buffers: PPO's normalisation statistics
travel with its weights) in shared memory, version v in slot v % slots.

Asynchronous PPO's actors collect rollout j with the weights learned from the
rollouts before j - lag (`samplers.rollout.actors`): with lag + 1 slots, the
version an actor needs is never overwritten before it has read it, because the
learner cannot publish version j + 1 before it has rollout j. So an actor's
weights are a function of the rollout's index alone, not of which process was
faster: a seeded run is reproducible (Cleanba's argument, Huang et al. 2023).

Writing a slot marks it -1 first and its version last; a reader copies the slot
and keeps the copy only if the slot still holds the version it wanted after the
copy (the seqlock of `weights.shared`, per slot). The learner also says each new
version on the actors' pipes, so that they wait on the pipe, not by polling.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from pararl.mp.shared import ArraySpec

PREFIX = "ring."
VERSIONS = "ring:versions"


def ring_specs(model: nn.Module, slots: int) -> dict[str, ArraySpec]:
    """Arrays for `slots` copies of `model`'s state dict, and the slots' versions."""
    if slots < 1:
        raise ValueError(f"a weight ring needs >= 1 slot, got {slots}")
    specs = {
        PREFIX + key: ArraySpec((slots, *value.shape), _numpy_dtype(value))
        for key, value in model.state_dict().items()
    }
    return specs | {VERSIONS: ArraySpec((slots,), np.dtype(np.int64))}


def _numpy_dtype(tensor: torch.Tensor) -> np.dtype:
    return np.dtype(torch.empty(0, dtype=tensor.dtype).numpy().dtype)


class WeightRing:
    """Both sides of the ring over `arrays` (shared memory, or local arrays for the
    serial twin); the side that creates the arrays makes it with `holding`."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.versions = arrays[VERSIONS]
        self.slots = len(self.versions)
        self.tensors = {
            k.removeprefix(PREFIX): v for k, v in arrays.items() if k.startswith(PREFIX)
        }

    @classmethod
    def holding(cls, arrays: dict[str, np.ndarray], model: nn.Module) -> WeightRing:
        """A ring over fresh `arrays` (`ring_specs`) holding `model` as version 0 alone."""
        ring = cls(arrays)
        ring.versions[:] = -1  # fresh memory holds zeros, which would read as version 0
        ring.publish(model, 0)
        return ring

    def publish(self, model: nn.Module, version: int) -> None:
        slot = version % self.slots
        self.versions[slot] = -1  # writing
        with torch.no_grad():
            for key, value in model.state_dict().items():
                self.tensors[key][slot] = value.detach().cpu().numpy()
        self.versions[slot] = version

    def holds(self, version: int) -> bool:
        return int(self.versions[version % self.slots]) == version

    def load(self, model: nn.Module, version: int) -> bool:
        """Load `version` into `model`; False if the ring does not hold it (not yet
        published, overwritten, or written meanwhile)."""
        slot = version % self.slots
        if not self.holds(version):
            return False
        state = {k: torch.from_numpy(np.array(v[slot])) for k, v in self.tensors.items()}
        if not self.holds(version):
            return False
        model.load_state_dict(state)
        return True


__all__ = ["WeightRing", "ring_specs"]
