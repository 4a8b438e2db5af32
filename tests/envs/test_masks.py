"""Where action masks come from and how they are read: an `action_masks()` method
becomes the info's mask, a batch's masks are read with the rows that allow nothing
taken as allowing everything, and masks pararl cannot take are refused in one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from pararl.envs.make import make_env, probe_masks
from pararl.envs.masks import MASK_KEY, ActionMasksInInfo, batch_mask, random_action
from pararl.errors import UsageError


def test_an_action_masks_method_becomes_the_infos_mask() -> None:
    env = make_env("pararl/MaskedChoice-v0")
    try:
        assert isinstance(env, ActionMasksInInfo)
        _, info = env.reset(seed=0)
        for _ in range(20):
            mask = info[MASK_KEY]
            assert mask.dtype == np.bool_
            np.testing.assert_array_equal(mask, env.unwrapped._mask)  # type: ignore[attr-defined]
            _, _, _, _, info = env.step(random_action(env.action_space, info))
    finally:
        env.close()
    assert not isinstance(make_env("CartPole-v1"), ActionMasksInInfo)


def test_a_batch_mask_allows_something_in_every_row() -> None:
    assert batch_mask({}) is None
    infos = {
        MASK_KEY: np.array([[1, 0, 0], [0, 0, 0], [0, 1, 1], [0, 0, 0]], np.int8),
        f"_{MASK_KEY}": np.array([True, True, True, False]),
    }
    mask = batch_mask(infos)
    assert mask is not None
    assert mask.dtype == np.bool_
    assert mask.astype(int).tolist() == [[1, 0, 0], [1, 1, 1], [0, 1, 1], [1, 1, 1]]
    assert infos[MASK_KEY][1].tolist() == [0, 0, 0]  # the infos are left as they were


def test_random_actions_keep_to_the_mask() -> None:
    space = gym.spaces.MultiDiscrete([3, 4], start=[1, 0])
    space.seed(0)
    info = {MASK_KEY: np.array([0, 1, 0, 1, 0, 0, 1], bool)}
    drawn = {tuple(random_action(space, info).tolist()) for _ in range(200)}
    assert drawn == {(2, 0), (2, 3)}
    assert space.contains(np.array([2, 3]))


class _Masked(gym.Env[np.ndarray, Any]):
    """A masked env of `space` whose masks have `size` values."""

    def __init__(self, space: gym.Space, size: int) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space, self.size = space, size

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        return np.zeros(2, np.float32), {MASK_KEY: np.ones(self.size, bool)}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.zeros(2, np.float32), 0.0, True, False, {MASK_KEY: np.ones(self.size, bool)}


@pytest.fixture
def bad_masks() -> Iterator[None]:
    gym.register("test/MaskedBits-v0", lambda: _Masked(gym.spaces.MultiBinary(3), 3))
    gym.register("test/MaskTooShort-v0", lambda: _Masked(gym.spaces.Discrete(4), 3))
    yield
    gym.registry.pop("test/MaskedBits-v0")
    gym.registry.pop("test/MaskTooShort-v0")


@pytest.mark.usefixtures("bad_masks")
def test_masks_pararl_cannot_take_are_refused() -> None:
    with pytest.raises(UsageError, match="masks Discrete and MultiDiscrete actions"):
        probe_masks("test/MaskedBits-v0", gym.spaces.MultiBinary(3))
    with pytest.raises(UsageError, match="has 3 values, and its actions Discrete"):
        probe_masks("test/MaskTooShort-v0", gym.spaces.Discrete(4))
    assert probe_masks("CartPole-v1", gym.spaces.Discrete(2)) is False
    assert probe_masks("pararl/MaskedChoiceInfo-v0", gym.spaces.Discrete(4)) is True


@pytest.mark.usefixtures("bad_masks")
def test_a_refused_mask_is_one_line_and_exit_2(tmp_path: Path, pararl: Any) -> None:
    result = pararl("train", "ppo", "--env", "test/MaskedBits-v0", "--run-dir", str(tmp_path))
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "masks Discrete and MultiDiscrete actions" in lines[0]
