"""Publishing weights through shared memory with a version counter (a seqlock).

The learner bumps the counter to odd, writes the flat parameters, bumps it to
even. A reader copies the parameters between two reads of the counter and keeps
the copy only if both reads are the same even number, so it never loads a torn
half-written vector. The network is never pickled.
"""

from __future__ import annotations

import numpy as np
from torch import nn

from pararl.models import flat_to_params, num_params, params_to_flat
from pararl.mp.shared import ArraySpec


def weight_specs(model: nn.Module) -> dict[str, ArraySpec]:
    return {
        "weights": ArraySpec((num_params(model),), np.dtype(np.float32)),
        "version": ArraySpec((1,), np.dtype(np.int64)),
        "weights_tag": ArraySpec((1,), np.dtype(np.int64)),
    }


class WeightPublisher:
    """Writes new weights with a tag (the learner's update count), so that readers
    can report policy lag in gradient updates."""

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

    def publish(self, model: nn.Module, tag: int) -> int:
        self.counter[0] += 1  # odd: writing
        params_to_flat(model, self.flat)
        self.tag[0] = tag
        self.counter[0] += 1  # even: consistent
        return tag


class WeightReader:
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
