"""PPO's rollout is num_steps x num_envs: its envs stay what the config says on any
machine, split over as many workers as divide them."""

from __future__ import annotations

import pytest

from pararl import PPOConfig
from pararl.errors import UsageError


@pytest.mark.parametrize(
    ("cores", "split"), [(1, (1, 8)), (2, (2, 4)), (3, (2, 4)), (4, (4, 2)), (16, (8, 1))]
)
def test_the_default_eight_envs_split_over_the_cores_that_divide_them(
    cores: int, split: tuple[int, int]
) -> None:
    assert PPOConfig().split_envs(cores) == split


def test_given_envs_split_over_given_workers() -> None:
    assert PPOConfig(num_envs=12).split_envs(16) == (12, 1)
    assert PPOConfig(num_envs=12).split_envs(5) == (4, 3)
    assert PPOConfig(num_envs=12, workers=3).split_envs(2) == (3, 4)
    with pytest.raises(UsageError, match="12 envs do not split evenly over --workers 5"):
        PPOConfig(num_envs=12, workers=5).split_envs(2)


def test_envs_per_worker_sets_the_envs_with_the_workers() -> None:
    assert PPOConfig(envs_per_worker=32).split_envs(2) == (2, 32)
    assert PPOConfig(envs_per_worker=3, workers=5).split_envs(2) == (5, 3)
    assert PPOConfig(envs_per_worker=4, num_envs=8).split_envs(2) == (2, 4)
    with pytest.raises(UsageError, match="--num-envs 8 is not 3 workers x --envs-per-worker 4"):
        PPOConfig(envs_per_worker=4, num_envs=8).split_envs(3)
