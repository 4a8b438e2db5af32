"""The tanh of the MLPs' hidden layers (PPO's actor-critic, the Gaussian policy):
`nn.Tanh`, except on the CPU's large batches, where it is computed as
2 * sigmoid(2x) - 1.

Why: torch's CPU `tanh` (float32) ran about 9x slower than its `sigmoid` here, at
any instruction set torch was told to use (`ATEN_CPU_CAPABILITY` default, avx2,
avx512: 136-138 µs for a [1024, 64] batch, against sigmoid's 15 µs at avx512). A
population of 8 CartPole agents (`--seeds 8`) updates minibatches of 2,048 rows
through four tanh layers, and there tanh took a quarter of the learner's time
(`py-spy`). The identity is exact in real numbers; in float32 it is within 1.8e-7 of
float64 tanh in absolute terms (torch's own `tanh`: 3e-8). Near zero that is no longer
a few last bits: 2 * sigmoid(2x) - 1 subtracts numbers close to 1, so tanh(1e-6) comes
out 7% off and tanh(1e-8) as 0. A hidden layer's output feeds a linear layer, where an
absolute error of 1e-7 is below what its float32 sums already carry.

The gradient is tanh's own, from the saved output, by the kernel `nn.Tanh`'s backward
runs (`tanh_backward`); it is differentiable, so second derivatives (TRPO's
Hessian-vector products, MAML's meta-gradient) go through it, and `torch.func`'s
reverse-mode transforms (`vmap`, `grad`) take it. Forward mode (`jvp`, `jacfwd`) is not
defined for it; nothing here uses forward mode.

Below `FAST_FROM` elements (acting on a few envs, a single run's minibatches) the
autograd function's fixed cost (~20 µs a call) outweighs the saving, and `torch.tanh`
runs. Forward and backward, best of 5: a [8, 64] batch took 14 µs by `torch.tanh` and
34 µs by the function; [256, 64] 51 and 44 µs; [512, 64] 90 and 57 µs; [2048, 64] 328
and 118 µs. On other devices and dtypes `torch.tanh` always runs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

FAST_FROM = 32_768  # elements: a [512, 64] batch


class _SigmoidTanh(torch.autograd.Function):
    """tanh(x) = 2 * sigmoid(2x) - 1, with tanh's gradient from its output."""

    generate_vmap_rule = True  # its forward and backward are plain torch operations

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x * 2).mul_(2).sub_(1)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[torch.Tensor], output: torch.Tensor) -> None:
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)  # grad * (1 - y^2), as nn.Tanh's


def tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh of `x`: see the module docstring for how."""
    if x.device.type == "cpu" and x.numel() >= FAST_FROM and x.dtype == torch.float32:
        out: torch.Tensor = _SigmoidTanh.apply(x)
        return out
    return torch.tanh(x)


class Tanh(nn.Module):
    """`nn.Tanh` for the MLPs' hidden layers (module docstring); no parameters, so a
    state dict is the same as with `nn.Tanh`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return tanh(x)


__all__ = ["FAST_FROM", "Tanh", "tanh"]
