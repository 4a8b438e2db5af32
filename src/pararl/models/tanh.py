"""The tanh of the MLPs' hidden layers (PPO's actor-critic, the Gaussian policy):
`nn.Tanh`, except on the CPU's large batches, where it is computed as
2 * sigmoid(2x) - 1.

Why: torch's CPU `tanh` (float32) ran about 9x slower than its `sigmoid` here, at
any instruction set torch was told to use (`ATEN_CPU_CAPABILITY` default, avx2,
avx512: 136-138 µs for a [1024, 64] batch, against sigmoid's 15 µs at avx512). A
population of 8 CartPole agents (`--seeds 8`) updates minibatches of 2,048 rows
through four tanh layers, and there tanh took a quarter of the learner's time
(`py-spy`). The identity is exact in real numbers; in float32 it is within 1.8e-7 of
float64 tanh (torch's own `tanh`: 3e-8), so a value can differ from `nn.Tanh`'s in its
last bits, as two GEMM kernels' can.

The gradient is tanh's own, 1 - y^2, from the saved output, as `nn.Tanh`'s is; it is
built from differentiable operations, so second derivatives (TRPO's Hessian-vector
products, MAML's meta-gradient) go through it.

Below `FAST_FROM` elements (acting on a few envs, a single run's minibatches) the
autograd function's fixed cost outweighs the saving, and `torch.tanh` runs: fwd+bwd
of a [8, 64] batch took 14 µs by `torch.tanh` and 34 µs by the function, of [256, 64]
49 and 48 µs, of [1024, 64] 163 and 86 µs. On other devices `torch.tanh` always runs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

FAST_FROM = 32_768  # elements: a [512, 64] batch


class _SigmoidTanh(torch.autograd.Function):
    """tanh(x) = 2 * sigmoid(2x) - 1, with tanh's gradient from its output."""

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x * 2).mul_(2).sub_(1)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[torch.Tensor], output: torch.Tensor) -> None:
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.addcmul(grad, grad * y, y, value=-1)  # grad * (1 - y^2)


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
