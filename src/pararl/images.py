"""Image observations: what counts as one, where its channels are, and which network
reads it.

An image is a rank-3 `Box` of `uint8` or `bool`. Its channel axis is the smaller of
the first and the last: Atari's frame stacks are channels-first `[4, 84, 84]`
(Gymnasium's `FrameStackObservation` puts the stack in front), MinAtar's states are
channels-last `[10, 10, C]` (as the `minatar` package gives them, one boolean plane
per kind of object). Networks take either as it comes and move the channels to the
front themselves (`models_cnn.ImageInput`), so frames stay in the env's layout and
dtype all the way to the learner.

The Nature CNN's three convolutions (8x8/4, 4x4/2, 3x3/1) need at least 36 pixels on
each side; smaller images (MinAtar's 10x10) get the MinAtar network. Dict and Tuple
observations get the multi-input encoder (`models.multi`), which applies these rules
to each image leaf, and so do bare Discrete and MultiDiscrete ones (read one-hot).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import numpy as np

from pararl.errors import UsageError

ModelName = Literal["mlp", "nature-cnn", "minatar-cnn", "multi-input"]
MODELS: tuple[ModelName, ...] = ("mlp", "nature-cnn", "minatar-cnn", "multi-input")
NATURE_MIN_SIDE = 36  # (36 - 8) / 4 + 1 = 8 -> (8 - 4) / 2 + 1 = 3 -> 3 - 3 + 1 = 1


def is_image(space: gym.Space) -> bool:
    """A rank-3 Box of uint8 or bool (frames, or MinAtar's object planes)."""
    return (
        isinstance(space, gym.spaces.Box)
        and len(space.shape) == 3
        and space.dtype in (np.dtype(np.uint8), np.dtype(np.bool_))
    )


@dataclass(frozen=True)
class ImageLayout:
    """An image's sizes, and whether its channels come last in the env's arrays."""

    channels: int
    height: int
    width: int
    channels_last: bool
    scale: float  # what one unit of the stored dtype is worth: 1/255 for uint8, 1 for bool

    @classmethod
    def of(cls, shape: tuple[int, ...], dtype: np.dtype) -> ImageLayout:
        if len(shape) != 3:
            raise ValueError(f"an image has three axes, got shape {shape}")
        last = shape[-1] < shape[0]  # the channel axis is the smaller end
        c, h, w = (shape[2], shape[0], shape[1]) if last else shape
        scale = 1.0 / 255.0 if np.dtype(dtype) == np.uint8 else 1.0
        return cls(int(c), int(h), int(w), last, scale)


MULTI_INPUT = (gym.spaces.Dict, gym.spaces.Tuple, gym.spaces.Discrete, gym.spaces.MultiDiscrete)


def is_multi_input(space: gym.Space) -> bool:
    """What the multi-input encoder reads: a Dict or Tuple space, or a bare Discrete
    or MultiDiscrete one (its values one-hot; `observations.WHOLE`)."""
    return isinstance(space, MULTI_INPUT)


def default_model(space: gym.Space) -> ModelName:
    """`--model auto`: the multi-input encoder for Dict, Tuple, Discrete and
    MultiDiscrete observations, the Nature CNN for images of 36 pixels a side or more,
    the MinAtar CNN for smaller ones, an MLP for everything else."""
    if is_multi_input(space):
        return "multi-input"
    if not is_image(space):
        return "mlp"
    assert space.shape is not None
    return image_model(tuple(space.shape), np.dtype(space.dtype))


def image_model(shape: tuple[int, ...], dtype: np.dtype) -> ModelName:
    """The CNN for images of this shape and dtype: the Nature CNN from 36 pixels a
    side, the MinAtar CNN below."""
    layout = ImageLayout.of(shape, dtype)
    return "nature-cnn" if min(layout.height, layout.width) >= NATURE_MIN_SIDE else "minatar-cnn"


def check_model(model: str, env_id: str, space: gym.Space) -> None:
    """A UsageError when `model` cannot read `env_id`'s observations."""
    if is_multi_input(space):
        if model not in ("auto", "multi-input"):
            reads = (
                "each key (a CNN for images, flattened vectors, one-hot discrete values)"
                if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))
                else "them one-hot"
            )
            raise UsageError(
                f"--model {model} reads one {'vector' if model == 'mlp' else 'image'}; "
                f"{env_id} gives {type(space).__name__} "
                f"observations: use --model multi-input (or auto), which reads {reads}"
            )
        return
    if model == "multi-input":
        raise UsageError(
            f"--model multi-input reads Dict, Tuple, Discrete and MultiDiscrete "
            f"observations; {env_id} gives {space}. Use --model auto."
        )
    if model in ("auto", "mlp"):
        return
    if not is_image(space):
        raise UsageError(
            f"--model {model} needs image observations (a uint8/bool Box of rank 3); "
            f"{env_id} gives {space}. Use --model mlp (or auto)."
        )
    assert space.shape is not None
    layout = ImageLayout.of(tuple(space.shape), np.dtype(space.dtype))
    if model == "nature-cnn" and min(layout.height, layout.width) < NATURE_MIN_SIDE:
        raise UsageError(
            f"--model nature-cnn needs images of at least {NATURE_MIN_SIDE}x{NATURE_MIN_SIDE} "
            f"pixels; {env_id} gives {layout.height}x{layout.width}. Use --model minatar-cnn."
        )


__all__ = [
    "MODELS",
    "NATURE_MIN_SIDE",
    "ImageLayout",
    "ModelName",
    "check_model",
    "default_model",
    "image_model",
    "is_image",
    "is_multi_input",
]
