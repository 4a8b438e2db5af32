"""Weights to actor processes through shared memory, with a version counter (a
seqlock): the multiprocess `WeightSender`.

The learner bumps the counter to odd, writes the flat parameters, bumps it to
even. A reader copies the parameters between two reads of the counter and keeps
the copy only if both reads are the same even number, so it never loads a torn
half-written vector. The network is never pickled: one flat float32 vector
(`params_to_flat`) per version, copied into each actor's own CPU model.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from pararl.models.networks import num_params
from pararl.mp.shared import ArraySpec


@torch.no_grad()
def params_to_flat(model: nn.Module, out: np.ndarray) -> None:
    """Write all parameters of `model`, in order, into the float32 vector `out`."""
    offset = 0
    for p in model.parameters():
        n = p.numel()
        out[offset : offset + n] = p.detach().reshape(-1).cpu().numpy()
        offset += n


@torch.no_grad()
def flat_to_params(flat: np.ndarray, model: nn.Module) -> None:
    """Load the float32 vector `flat` (as written by `params_to_flat`) into `model`."""
    offset = 0
    for p in model.parameters():
        n = p.numel()
        p.copy_(torch.from_numpy(flat[offset : offset + n]).view_as(p))
        offset += n


def weight_specs(model: nn.Module) -> dict[str, ArraySpec]:
    return {
        "weights": ArraySpec((num_params(model),), np.dtype(np.float32)),
        "version": ArraySpec((1,), np.dtype(np.int64)),
        "weights_tag": ArraySpec((1,), np.dtype(np.int64)),
    }


class WeightPublisher:
    """Writes new weights with a tag (the version: the learner's update count), so
    that readers can report policy lag in gradient updates."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.flat, self.counter, self.tag = (
            arrays["weights"],
            arrays["version"],
            arrays["weights_tag"],
        )

    @property
    def version(self) -> int:
        """The tag of the weights published last."""
        return int(self.tag[0])

    def publish(self, model: nn.Module, version: int) -> None:
        self.counter[0] += 1  # odd: writing
        params_to_flat(model, self.flat)
        self.tag[0] = version
        self.counter[0] += 1  # even: consistent


class WeightReader:
    """The actor's side: loads the newest consistent weights into its own model."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.flat, self.counter, self.tag = (
            arrays["weights"],
            arrays["version"],
            arrays["weights_tag"],
        )
        self.version = -1  # tag of the weights loaded last
        self._seen = -1  # counter value they were read at
        self._scratch = np.empty_like(self.flat)

    def refresh(self, model: nn.Module) -> bool:
        """Load the newest consistent weights into `model`; True if it changed."""
        before = int(self.counter[0])
        if before % 2 or before == self._seen:
            return False
        np.copyto(self._scratch, self.flat)
        tag = int(self.tag[0])
        if int(self.counter[0]) != before:
            return False  # written meanwhile: try again next time
        flat_to_params(self._scratch, model)
        self.version, self._seen = tag, before
        return True


__all__ = [
    "WeightPublisher",
    "WeightReader",
    "flat_to_params",
    "params_to_flat",
    "weight_specs",
]
