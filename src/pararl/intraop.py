"""torch's intra-op thread count held for one block of code: the one mechanism the
thread rules (`pararl.mp.threads`), the start-up device timings and the seeded weight
initialisation use. Below every layer that needs it, and without importing torch at
import time (the vector envs import `pararl.mp` without torch)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op threads set to `threads` inside the block, restored after it
    (None: left as they are)."""
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


__all__ = ["torch_threads"]
