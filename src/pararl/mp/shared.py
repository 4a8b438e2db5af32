"""Named numpy arrays in one shared-memory block, allocated once from their specs.

`SharedArrays` holds several named numpy arrays in one anonymous shared-memory
block. The block is created by `multiprocessing` (`RawArray`): its backing file is
unlinked as soon as it is mapped, so nothing is ever left in `/dev/shm`, whatever
happens to the processes; the memory is freed when the last process holding it
exits. It is handed to children when they start (all start methods) and viewed as
numpy arrays on each side with no copy.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import Any

import numpy as np

_ALIGN = 64  # one cache line: workers writing neighbouring arrays do not share lines


@dataclass(frozen=True)
class ArraySpec:
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _offsets(specs: dict[str, ArraySpec]) -> tuple[dict[str, int], int]:
    offsets, total = {}, 0
    for name, spec in specs.items():
        offsets[name] = total
        total += -(-spec.nbytes // _ALIGN) * _ALIGN
    return offsets, max(total, _ALIGN)


class SharedArrays:
    """Named arrays in one shared-memory block; picklable to child processes at start."""

    def __init__(self, specs: dict[str, ArraySpec], ctx: BaseContext) -> None:
        self.specs = dict(specs)
        self._offsets, self.nbytes = _offsets(self.specs)
        self._raw = ctx.RawArray(ctypes.c_uint8, self.nbytes)
        self._views: dict[str, np.ndarray] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {
            "specs": self.specs,
            "_offsets": self._offsets,
            "nbytes": self.nbytes,
            "_raw": self._raw,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._views = None

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        if self._views is None:
            raw = memoryview(self._raw).cast("B")
            block = np.frombuffer(raw, dtype=np.uint8, count=self.nbytes)
            self._views = {
                name: block[off : off + spec.nbytes].view(spec.dtype).reshape(spec.shape)
                for (name, spec), off in zip(
                    self.specs.items(), self._offsets.values(), strict=True
                )
            }
        return self._views


def local_arrays(specs: dict[str, ArraySpec]) -> dict[str, np.ndarray]:
    """Ordinary (process-local) arrays with the same specs: the serial twin's storage."""
    return {name: np.zeros(spec.shape, spec.dtype) for name, spec in specs.items()}
