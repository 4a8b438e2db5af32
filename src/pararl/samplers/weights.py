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
from pararl.vector.shared import ArraySpec


def weight_specs(model: nn.Module) -> dict[str, ArraySpec]:
    return {
        "weights": ArraySpec((num_params(model),), np.dtype(np.float32)),
        "version": ArraySpec((1,), np.dtype(np.int64)),
    }


class WeightPublisher:
    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.flat, self.counter = arrays["weights"], arrays["version"]

    @property
    def version(self) -> int:
        return int(self.counter[0]) // 2

    def publish(self, model: nn.Module) -> int:
        self.counter[0] += 1  # odd: writing
        params_to_flat(model, self.flat)
        self.counter[0] += 1  # even: consistent
        return self.version


class WeightReader:
    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.flat, self.counter = arrays["weights"], arrays["version"]
        self.version = -1
        self._scratch = np.empty_like(self.flat)

    def refresh(self, model: nn.Module) -> bool:
        """Load the newest consistent weights into `model`; True if it changed."""
        before = int(self.counter[0])
        if before % 2 or before // 2 == self.version:
            return False
        np.copyto(self._scratch, self.flat)
        if int(self.counter[0]) != before:
            return False  # written meanwhile: try again next time
        flat_to_params(self._scratch, model)
        self.version = before // 2
        return True
