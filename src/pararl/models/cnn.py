"""Networks for image observations: the trunks a Q-network head or an actor-critic's
heads sit on (`models.build` picks them by `--model`).

- `nature-cnn`: Mnih et al. 2015 ("Human-level control through deep reinforcement
  learning"): 32 8x8 filters stride 4, 64 4x4 stride 2, 64 3x3 stride 1, then a
  512-unit hidden layer; ReLU throughout.
- `minatar-cnn`: Young & Tian 2019 (MinAtar): 16 3x3 filters stride 1, then a
  128-unit hidden layer.

Either is a `Trunk` under a Q-network head (`QNetwork`, dueling optional) or under
the policy and value heads of an `ActorCritic` (one shared trunk, orthogonal
initialisation as in CleanRL's `ppo_atari`). Observations arrive in the env's dtype
(`uint8` frames, `bool` MinAtar planes) and layout; `ImageInput` converts them to
float on the network's device, scales `uint8` by 1/255 and moves the channels first.
So samplers, rollouts and replay keep the compact dtype, and only the learner's
device sees floats.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from pararl.images import ImageLayout, ModelName
from pararl.models.networks import Trunk, weights_in_out


class ImageInput(nn.Module):
    """Raw images [B, ...] in the env's layout -> float [B, C, H, W] in [0, 1].

    `channels_innermost`: on the CPU, hand the convolutions memory with the channels
    innermost (`torch.channels_last`), oneDNN's fast path for Atari's 84x84 frames;
    otherwise plain channels-first memory, which ran faster for MinAtar's 10x10 planes
    (there the convolution's output would be copied back for `Flatten`, and the step's
    convolutions ran slower in it; BENCHMARKS.md, "Image memory layout"). Either way
    the values, the shape and the order `Flatten` reads them in are the same."""

    def __init__(self, layout: ImageLayout, channels_innermost: bool = True) -> None:
        super().__init__()
        self.channels_last, self.scale = layout.channels_last, layout.scale
        self.channels_innermost = channels_innermost

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.permute(0, 3, 1, 2) if self.channels_last else obs
        if x.device.type == "cpu":
            # converted before `float()`, on bytes (a view already where the env's
            # layout is the one asked for)
            x = x.contiguous(
                memory_format=torch.channels_last
                if self.channels_innermost
                else torch.contiguous_format
            )
        x = x.float()  # keeps the memory format
        return x * self.scale if self.scale != 1.0 else x


def _conv_trunk(
    layout: ImageLayout, convs: nn.Sequential, hidden: int, channels_innermost: bool
) -> Trunk:
    """`convs`, flattened, then a hidden layer of `hidden` units; the flattened size
    is measured on an empty image of `layout`'s size."""
    with torch.no_grad():
        flat = convs(torch.zeros(1, layout.channels, layout.height, layout.width)).numel()
    body = nn.Sequential(convs, nn.Flatten(), weights_in_out(nn.Linear(flat, hidden)))
    return Trunk(ImageInput(layout, channels_innermost), body, hidden)


def nature_cnn(layout: ImageLayout) -> Trunk:
    """Mnih et al. 2015's convolutions and 512-unit hidden layer."""
    convs = nn.Sequential(
        nn.Conv2d(layout.channels, 32, kernel_size=8, stride=4),
        nn.ReLU(),
        nn.Conv2d(32, 64, kernel_size=4, stride=2),
        nn.ReLU(),
        nn.Conv2d(64, 64, kernel_size=3, stride=1),
        nn.ReLU(),
    )
    return _conv_trunk(layout, convs, 512, channels_innermost=True)


def minatar_cnn(layout: ImageLayout) -> Trunk:
    """Young & Tian 2019's single convolution and 128-unit hidden layer."""
    convs = nn.Sequential(nn.Conv2d(layout.channels, 16, kernel_size=3, stride=1), nn.ReLU())
    return _conv_trunk(layout, convs, 128, channels_innermost=False)


TRUNKS = {"nature-cnn": nature_cnn, "minatar-cnn": minatar_cnn}


def image_trunk(model: ModelName, obs_shape: tuple[int, ...], obs_dtype: npt.DTypeLike) -> Trunk:
    """The trunk named `model` for observations of this shape and dtype."""
    return TRUNKS[model](ImageLayout.of(obs_shape, np.dtype(obs_dtype)))


__all__ = ["ImageInput", "image_trunk", "minatar_cnn", "nature_cnn"]
