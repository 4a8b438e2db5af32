"""The multi-input encoder: Dict and Tuple observations' leaves, each read by what it
is (a CNN of its size per image, vectors flattened, discrete values one-hot), into one
feature vector of the size it says; `--model auto` picks it for such spaces and refuses
the others' models for them. A bare Discrete or MultiDiscrete observation is its one
leaf: read one-hot from the array the env gives, stored as that array."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector.utils import batch_space

from pararl.config import DQNConfig, PPOConfig, env_kind
from pararl.devices import example_obs
from pararl.errors import UsageError
from pararl.images import check_model, default_model
from pararl.models.acting import Draws
from pararl.models.build import actor_critic, q_network
from pararl.models.multi import MultiInputEncoder
from pararl.models.normalize import NormSettings
from pararl.observations import (
    WHOLE,
    as_batch,
    encoded,
    flat,
    leaves,
    stacked,
    stored,
    vector_part,
)

SMALL_IMAGE = gym.spaces.Box(0, 255, (3, 16, 16), np.uint8)
MINATAR = gym.spaces.Box(0, 1, (10, 10, 4), np.bool_)
ATARI = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
VECTOR = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DICT = gym.spaces.Dict(
    {
        "image": SMALL_IMAGE,
        "pos": VECTOR,
        "mode": gym.spaces.Discrete(3, start=1),
        "grid": gym.spaces.Box(-1.0, 1.0, (2, 3), np.float64),
    }
)
NESTED = gym.spaces.Tuple(
    (
        MINATAR,
        gym.spaces.Dict(
            {"keys": gym.spaces.MultiDiscrete([2, 4]), "on": gym.spaces.MultiBinary(3)}
        ),
    )
)


def batch(space: gym.Space, n: int, seed: int = 0) -> object:
    batched = batch_space(space, n)
    batched.seed(seed)
    return batched.sample()


def test_leaves_are_named_by_their_path_and_stored_in_their_kinds_dtype() -> None:
    found = {leaf.name: leaf for leaf in leaves(DICT)}
    assert sorted(found) == ["grid", "image", "mode", "pos"]
    assert (found["image"].kind, found["image"].dtype) == ("image", np.dtype(np.uint8))
    assert (found["grid"].kind, found["grid"].dtype, found["grid"].size) == (
        "vector",
        np.dtype(np.float32),  # a float64 Box is learned from as float32
        6,
    )
    assert (found["mode"].kind, found["mode"].classes, found["mode"].start) == (
        "discrete",
        (3,),
        (1,),
    )
    nested = leaves(NESTED)
    assert [(leaf.name, leaf.kind) for leaf in nested] == [
        ("0", "image"),
        ("1.keys", "discrete"),
        ("1.on", "vector"),
    ]
    assert nested[1].classes == (2, 4)
    # a leaf saved in a checkpoint reads back the same
    assert all(type(leaf).from_dict(leaf.as_dict()) == leaf for leaf in (*nested, *found.values()))


def test_a_leaf_the_encoder_cannot_read_is_refused_in_one_line() -> None:
    space = gym.spaces.Dict({"pos": VECTOR, "name": gym.spaces.Text(8)})
    with pytest.raises(UsageError, match="leaf 'name' is Text") as refused:
        leaves(space)
    assert "\n" not in str(refused.value)


def test_flat_takes_what_envs_give_and_gives_a_dict_of_leaves_back_as_it_is() -> None:
    obs = batch(NESTED, 2)
    leaves_by_name = flat(obs)
    assert sorted(leaves_by_name) == ["0", "1.keys", "1.on"]
    assert flat(leaves_by_name) == leaves_by_name
    one = NESTED.sample()
    rows = stacked([one, one, one])
    assert rows["1.keys"].shape == (3, 2)


def test_the_encoder_says_its_size_and_reads_each_leaf_by_its_kind() -> None:
    torch.manual_seed(0)
    encoder = MultiInputEncoder(leaves(DICT))
    assert encoder.models == ["minatar-cnn"]  # 16 pixels a side: under the Nature CNN's 36
    assert encoder.normalized == 4 + 6  # pos and grid: the vectors
    assert encoder.features == 128 + 10 + 3
    obs = flat(batch(DICT, 5))
    x = {k: torch.as_tensor(v) for k, v in obs.items()}
    features = encoder(x)
    assert features.shape == (5, encoder.features)
    # the image trunk's features, then the vectors in leaf order, then the one-hot code
    torch.testing.assert_close(features[:, :128], encoder.trunks[0](x["image"]))
    vectors = torch.cat([x["grid"].flatten(1).float(), x["pos"]], dim=1)
    torch.testing.assert_close(features[:, 128:138], vectors)
    torch.testing.assert_close(features[:, 138:], torch.eye(3)[x["mode"] - 1])  # start 1
    np.testing.assert_allclose(encoder.vector_part(obs), vectors.numpy())
    # normalisation sees the vectors alone
    doubled = encoder(x, lambda v: 2 * v)
    torch.testing.assert_close(doubled[:, 128:138], 2 * vectors)
    torch.testing.assert_close(doubled[:, :128], features[:, :128])
    torch.testing.assert_close(doubled[:, 138:], features[:, 138:])
    assert "image 3x16x16 uint8 -> minatar-cnn (128)" in encoder.describe()


def test_each_image_gets_the_cnn_of_its_size_and_multi_discrete_entries_their_own_codes() -> None:
    space = gym.spaces.Dict(
        {"frames": ATARI, "planes": MINATAR, "keys": gym.spaces.MultiDiscrete([2, 4])}
    )
    encoder = MultiInputEncoder(leaves(space))
    assert encoder.models == ["nature-cnn", "minatar-cnn"]
    assert encoder.features == 512 + 128 + 2 + 4
    keys = torch.tensor([[1, 3], [0, 0]])
    codes = encoder.one_hots[0](keys)
    torch.testing.assert_close(
        codes, torch.tensor([[0, 1, 0, 0, 0, 1], [1, 0, 1, 0, 0, 0]]).float()
    )


def test_auto_picks_the_encoder_for_dict_and_tuple_spaces_and_refuses_other_models() -> None:
    assert default_model(DICT) == default_model(NESTED) == "multi-input"
    # the kind of defaults follows the actions (its images are not the run's kind)
    assert env_kind(DICT, gym.spaces.Discrete(2)) == "discrete"
    assert env_kind(NESTED, gym.spaces.Box(-1, 1, (2,))) == "continuous"
    ppo = PPOConfig(env="x").for_spaces(DICT, gym.spaces.Discrete(2))
    assert ppo.config.model == ppo.defaults["model"] == "multi-input"
    assert (
        DQNConfig(env="x").for_spaces(NESTED, gym.spaces.Discrete(2)).config.model == "multi-input"
    )
    assert PPOConfig(env="x").for_spaces(VECTOR, gym.spaces.Discrete(2)).config.model == "mlp"
    for model in ("auto", "multi-input"):
        check_model(model, "x", DICT)
    for model in ("mlp", "nature-cnn", "minatar-cnn"):
        with pytest.raises(UsageError, match="use --model multi-input"):
            check_model(model, "x", DICT)
    with pytest.raises(UsageError, match="reads Dict, Tuple, Discrete and MultiDiscrete"):
        check_model("multi-input", "CartPole-v1", VECTOR)


def test_an_actor_critic_acts_on_the_envs_batch_or_its_leaves_alike() -> None:
    torch.manual_seed(0)
    specs = leaves(NESTED)
    ac = actor_critic("multi-input", (), np.float32, 2, True, (32, 32), leaves=specs)  # type: ignore[arg-type]
    assert ac.encoder is not None
    assert ac.obs_dim == ac.encoder.features
    obs = batch(NESTED, 6)
    by_name = flat(obs)
    assert (ac.greedy(obs) == ac.greedy(by_name)).all()
    draws = Draws(generator=torch.Generator().manual_seed(1))
    acted = ac.act(obs, None, np.ones(6, bool), "sampled", draws)
    assert acted.action.shape == acted.logprob.shape == acted.value.shape == (6,)  # type: ignore[union-attr]
    tensors = {k: torch.as_tensor(v) for k, v in by_name.items()}
    logprob, entropy, value = ac.evaluate(tensors, torch.as_tensor(acted.action))
    assert logprob.shape == entropy.shape == value.shape == (6,)
    logprob.sum().backward()  # gradients reach the encoder's CNN
    assert ac.encoder.trunks[0].body[0][0].weight.grad is not None


def test_normalisation_of_a_dict_applies_to_its_vector_leaves_alone() -> None:
    specs = leaves(DICT)
    ac = actor_critic(
        "multi-input", (), np.float32, 2, True, (8,), norm=NormSettings(True), leaves=specs
    )  # type: ignore[arg-type]
    assert ac.norm.obs_mean.shape == (10,)
    obs = flat(batch(DICT, 50))
    ac.update_norm(obs, np.zeros(50))
    np.testing.assert_allclose(ac.norm.obs_mean.numpy(), vector_part(obs, specs).mean(axis=0))


def test_a_q_network_reads_a_dict_through_the_encoder_and_an_mlp() -> None:
    specs = leaves(DICT)
    q = q_network("multi-input", (), np.float32, 3, (32, 16), leaves=specs)  # type: ignore[arg-type]
    dueling = q_network("multi-input", (), np.float32, 3, (32,), dueling=True, leaves=specs)  # type: ignore[arg-type]
    obs = batch(DICT, 4)
    assert q.greedy(obs).shape == dueling.greedy(obs).shape == (4,)


def test_an_observation_or_a_batch_of_them_as_leaves_or_a_one_line_refusal() -> None:
    specs = leaves(DICT)
    one, single = as_batch(DICT.sample(), specs)
    assert single
    assert one["image"].shape == (1, 3, 16, 16)
    assert one["mode"].dtype == np.int64
    many, single = as_batch(batch(DICT, 3), specs)
    assert not single
    assert many["pos"].shape == (3, 4)
    with pytest.raises(UsageError, match="this agent takes"):
        as_batch({"pos": np.zeros(4)}, specs)
    mixed = dict(flat(batch(DICT, 3)), pos=np.zeros((2, 4)))
    with pytest.raises(UsageError, match="with one N"):
        as_batch(mixed, specs)


def test_a_bare_discrete_observation_is_one_leaf_read_one_hot_from_its_array() -> None:
    space = gym.spaces.Discrete(5, start=2)  # Taxi's and FrozenLake's kind, not from 0
    [leaf] = encoded(space)
    assert (leaf.name, leaf.kind, leaf.shape, leaf.dtype) == (WHOLE, "discrete", (), np.int64)
    assert stored(encoded(space)) == ()  # stored as the one array the env gives
    assert encoded(VECTOR) == ()
    assert leaf.describe() == "observation 5 values"
    assert default_model(space) == "multi-input"
    ppo = PPOConfig(env="x").for_spaces(space, gym.spaces.Discrete(2))
    assert ppo.config.model == "multi-input"
    with pytest.raises(UsageError, match="which reads them one-hot"):
        check_model("mlp", "Taxi-v4", space)

    q = q_network("multi-input", (), np.int64, 3, (16,), leaves=encoded(space))
    assert next(m for m in q.modules() if isinstance(m, MultiInputEncoder)).features == 5
    values = torch.tensor([2, 6, 4])
    np.testing.assert_array_equal(q.greedy(values), q.greedy({WHOLE: values}))
    assert flat(values)[WHOLE] is values  # a bare array is its own leaf
    encoder = MultiInputEncoder(encoded(space))
    torch.testing.assert_close(encoder(values), torch.eye(5)[[0, 4, 2]])
    assert example_obs((), 4, np.int64, encoded(space)).tolist() == [2] * 4  # its lowest

    one, single = as_batch(6, encoded(space))  # an int, as the env gives it
    assert single
    assert one[WHOLE].tolist() == [6]
    many, single = as_batch([2, 3], encoded(space))
    assert not single
    assert many[WHOLE].dtype == np.int64
    with pytest.raises(UsageError, match="this agent takes one observation 5 values"):
        as_batch({"pos": 1}, encoded(space))
    with pytest.raises(UsageError, match="has a key ''"):  # the name of a whole observation
        leaves(gym.spaces.Dict({"": VECTOR, "pos": VECTOR}))


def test_a_bare_multidiscrete_observation_is_each_entry_one_hot() -> None:
    space = gym.spaces.MultiDiscrete([4, 4])  # e.g. a grid's (row, column)
    ac = actor_critic("multi-input", (2,), np.int64, 4, True, (8,), leaves=encoded(space))
    assert ac.encoder is not None
    assert ac.encoder.features == 8
    assert ac.encoder.normalized == 0  # one-hot values are never normalised
    obs = np.array([[0, 3], [2, 1]])
    torch.testing.assert_close(
        ac.encoder(torch.as_tensor(obs)),
        torch.tensor([[1, 0, 0, 0, 0, 0, 0, 1], [0, 0, 1, 0, 0, 1, 0, 0]]).float(),
    )
    assert ac.greedy(obs).shape == (2,)
    one, single = as_batch(np.array([1, 2]), encoded(space))
    assert single
    assert one[WHOLE].shape == (1, 2)
