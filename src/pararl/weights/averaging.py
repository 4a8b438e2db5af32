"""Parameter averaging across replicas (the multi-process DQN post's first design,
docs/design/sources.md) as a way of shipping weights: every replica publishes its own and
holds the mean of all of them after.

Every rank calls these functions at the same point with tensors of the same shapes
and order; each call is one collective on the default process group (gloo on the
CPU, NCCL on CUDA). Flattening first keeps it to one `all_reduce` per average
however many layers the model has: on gloo the fixed cost per call dominates for
small nets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import nn

from pararl.optim import FlatAdam


@torch.no_grad()
def average_tensors(tensors: Sequence[torch.Tensor]) -> None:
    """Replace every tensor, on every rank, by its mean over the ranks (in place).

    Sum, then divide: every rank divides the same sum, so the ranks end bitwise
    equal (all_reduce hands each rank the same reduced values).
    """
    if not tensors:
        return
    flat = torch.cat([t.detach().reshape(-1) for t in tensors])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat.div_(dist.get_world_size())
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[offset : offset + n].view_as(t))
        offset += n


def module_tensors(module: nn.Module) -> list[torch.Tensor]:
    """The parameters and floating-point buffers of `module`, in a fixed order."""
    buffers = [b for b in module.buffers() if b.is_floating_point()]
    return [*module.parameters(), *buffers]


def average_parameters(module: nn.Module) -> None:
    """Average `module`'s parameters (and float buffers) over the ranks, in place."""
    average_tensors(module_tensors(module))


def adam_moments(optimizer: FlatAdam) -> list[torch.Tensor]:
    """Adam's first and second moments (one flat vector each, in parameter order).

    They exist from the start (zeros), so replicas whose learning starts at different
    times still line up. The step counts stay local: they only set Adam's bias
    correction.
    """
    return [optimizer.exp_avg, optimizer.exp_avg_sq]


class AveragedWeights:
    """A `WeightSender` for replicas: `publish` replaces the model's parameters (and
    float buffers), then the tensors `also` names (e.g. a target network, Adam's
    moments), by their mean over the ranks, in one `all_reduce`; every rank calls it
    at the same point."""

    def __init__(self, also: Callable[[], list[torch.Tensor]] = list) -> None:
        self.also = also
        self._version = -1

    @property
    def version(self) -> int:
        return self._version

    def publish(self, model: nn.Module, version: int) -> None:
        average_tensors([*module_tensors(model), *self.also()])
        self._version = version


__all__ = [
    "AveragedWeights",
    "adam_moments",
    "average_parameters",
    "average_tensors",
    "module_tensors",
]
