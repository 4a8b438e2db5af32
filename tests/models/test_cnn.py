"""Image networks on both layouts: Atari's channels-first uint8 frame stacks and
MinAtar's channels-last bool planes; `--model auto` picks by the observation space;
a network never changes the dtype it is given, and scales what it reads."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl.config import env_kind
from pararl.errors import UsageError
from pararl.images import ImageLayout, check_model, default_model, is_image
from pararl.models.build import actor_critic, q_network

ATARI = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
MINATAR = gym.spaces.Box(0, 1, (10, 10, 4), np.bool_)
VECTOR = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DISCRETE = gym.spaces.Discrete(3)


def sample(space: gym.spaces.Box, batch: int, seed: int = 0) -> np.ndarray:
    space.seed(seed)
    return np.stack([space.sample() for _ in range(batch)])


def test_auto_picks_the_network_and_the_kind_of_defaults_from_the_space() -> None:
    assert [default_model(s) for s in (ATARI, MINATAR, VECTOR)] == [
        "nature-cnn",
        "minatar-cnn",
        "mlp",
    ]
    assert [env_kind(s, DISCRETE) for s in (ATARI, MINATAR, VECTOR)] == [
        "image",
        "minatar",
        "discrete",
    ]
    # a float Box of rank 3 is not an image: an MLP reads it flattened
    assert not is_image(gym.spaces.Box(0.0, 1.0, (10, 10, 4), np.float32))


def test_layouts_of_both_kinds_of_image() -> None:
    assert ImageLayout.of((4, 84, 84), np.dtype(np.uint8)) == ImageLayout(4, 84, 84, False, 1 / 255)
    assert ImageLayout.of((10, 10, 4), np.dtype(np.bool_)) == ImageLayout(4, 10, 10, True, 1.0)
    assert ImageLayout.of((96, 96, 3), np.dtype(np.uint8)).channels_last


@pytest.mark.parametrize(
    ("model", "space"),
    [("nature-cnn", ATARI), ("minatar-cnn", MINATAR)],
)
def test_networks_run_on_raw_observations(model: str, space: gym.spaces.Box) -> None:
    obs = sample(space, 5)
    q = q_network(model, space.shape, space.dtype, 3, (), dueling=False)  # type: ignore[arg-type]
    dueling = q_network(model, space.shape, space.dtype, 3, (), dueling=True)  # type: ignore[arg-type]
    ac = actor_critic(model, space.shape, space.dtype, 3, True, ())  # type: ignore[arg-type]
    tensor = torch.as_tensor(obs)
    assert tensor.dtype in (torch.uint8, torch.bool)  # what samplers and replay hand over
    assert q(tensor).shape == dueling(tensor).shape == (5, 3)
    action, logprob, value = ac.act_tensors(tensor)
    assert action.shape == logprob.shape == value.shape == (5,)
    assert q.greedy(obs).shape == ac.greedy(obs).shape == (5,)
    assert torch.isfinite(q(tensor)).all()
    assert torch.isfinite(value).all()


def test_inputs_are_scaled_and_laid_out_as_the_env_gives_them() -> None:
    """uint8 frames are read as value/255; a channels-last image gives the same
    outputs as its channels-first transpose fed to the same weights."""
    torch.manual_seed(0)
    frames = sample(ATARI, 3)
    q = q_network("nature-cnn", ATARI.shape, np.uint8, 4, ())  # type: ignore[arg-type]
    as_float = q_network("nature-cnn", ATARI.shape, np.float32, 4, ())  # type: ignore[arg-type]
    as_float.load_state_dict(q.state_dict())
    expected = as_float(torch.as_tensor(frames, dtype=torch.float32) / 255)
    torch.testing.assert_close(q(torch.as_tensor(frames)), expected)

    planes = sample(MINATAR, 3)
    last = q_network("minatar-cnn", MINATAR.shape, np.bool_, 3, ())  # type: ignore[arg-type]
    first = q_network("minatar-cnn", (4, 10, 10), np.bool_, 3, ())
    first.load_state_dict(last.state_dict())
    torch.testing.assert_close(
        last(torch.as_tensor(planes)), first(torch.as_tensor(planes.transpose(0, 3, 1, 2)))
    )


def test_models_that_cannot_read_the_observations_are_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match="Use --model minatar-cnn"):
        check_model("nature-cnn", "MinAtar/Breakout-v1", MINATAR)
    with pytest.raises(UsageError, match="needs image observations"):
        check_model("minatar-cnn", "CartPole-v1", VECTOR)
    for model in ("auto", "mlp", "nature-cnn", "minatar-cnn"):
        check_model(model, "ALE/Pong-v5", ATARI)


def test_image_actor_critic_never_normalises_observations() -> None:
    from pararl.models.normalize import NormSettings

    ac = actor_critic("minatar-cnn", MINATAR.shape, np.bool_, 3, True, (), norm=NormSettings(True))  # type: ignore[arg-type]
    assert not ac.norm.settings.obs
    assert ac.image
    assert ac.shared


def test_convolutions_read_channels_innermost_on_the_cpu_with_the_same_values() -> None:
    """On the CPU the Nature CNN's trunk hands its convolutions channels-last memory
    (oneDNN's fast path), whatever the env's layout; values and shape are those of the
    plain channels-first float image, and the network's outputs match a plain
    convolution's."""
    from pararl.models.cnn import ImageInput

    frames = torch.as_tensor(sample(ATARI, 2))
    layout = ImageLayout.of(ATARI.shape, np.dtype(np.uint8))
    x = ImageInput(layout)(frames)
    assert x.shape == (2, 4, 84, 84)
    assert x.dtype == torch.float32
    assert x.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(x, frames.float() / 255)

    torch.manual_seed(0)
    q = q_network("nature-cnn", ATARI.shape, np.uint8, 4, ())  # type: ignore[arg-type]
    channels_first = (frames.float() / 255).contiguous()
    assert channels_first.is_contiguous()
    expected = q.net(torch.relu(q.trunk.body(channels_first)))
    torch.testing.assert_close(q(frames), expected)


def test_minatar_planes_reach_the_convolution_channels_first_with_the_same_values() -> None:
    """MinAtar's channels-last bool planes are handed to its convolution as plain
    channels-first memory (faster than channels-last at 10x10), with the values of the
    planes, and the network's outputs are a plain convolution's."""
    from pararl.models.cnn import ImageInput

    planes = torch.as_tensor(sample(MINATAR, 3))
    x = ImageInput(ImageLayout.of(MINATAR.shape, np.dtype(np.bool_)), False)(planes)
    assert x.shape == (3, MINATAR.shape[2], 10, 10)
    assert x.is_contiguous()
    torch.testing.assert_close(x, planes.permute(0, 3, 1, 2).float())

    torch.manual_seed(0)
    q = q_network("minatar-cnn", MINATAR.shape, np.bool_, 3, ())  # type: ignore[arg-type]
    assert not q.trunk.prep.channels_innermost
    expected = q.net(torch.relu(q.trunk.body(planes.permute(0, 3, 1, 2).float())))
    torch.testing.assert_close(q(planes), expected)


@pytest.mark.parametrize(("model", "space"), [("minatar-cnn", MINATAR), ("nature-cnn", ATARI)])
def test_the_trunks_hidden_layer_is_stored_in_out_and_computes_as_a_plain_one(
    model: str, space: gym.spaces.Box
) -> None:
    """The image trunks' wide hidden layer keeps its weight as an (in, out) array in
    memory (faster products on the CPU); its shape, its state and its outputs are a
    plain `nn.Linear`'s, and a checkpoint of it loads into a plain layer and back."""
    torch.manual_seed(0)
    q = q_network(model, space.shape, space.dtype, 4, ())  # type: ignore[arg-type]
    hidden = q.trunk.body[2]
    assert isinstance(hidden, torch.nn.Linear)
    assert hidden.weight.t().is_contiguous()
    assert not hidden.weight.is_contiguous()
    plain = torch.nn.Linear(hidden.in_features, hidden.out_features)
    plain.load_state_dict(hidden.state_dict())
    x = torch.randn(3, hidden.in_features)
    torch.testing.assert_close(hidden(x), plain(x))
    hidden.load_state_dict({k: v + 1 for k, v in plain.state_dict().items()})
    assert hidden.weight.t().is_contiguous()  # loading keeps the layout
    torch.testing.assert_close(hidden.weight, plain.weight + 1)
