"""Shared pieces of the meta-RL sampler tests: small Navigation2D samplers."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch

from pararl.models.gaussian import LinearGaussianPolicy, NoisePolicy
from pararl.samplers.meta.sampler import MultiTaskSampler

NAV = "pararl/Navigation2D-v0"


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def nav_sampler(
    recv: object = "all",
    backend: str = "parallel",
    policy: NoisePolicy | None = None,
    workers: int = 2,
    envs_per_worker: int = 3,
    episode_length: int = 20,
) -> MultiTaskSampler:
    return MultiTaskSampler(
        NAV,
        policy or LinearGaussianPolicy(2, 2, seed=1),
        num_workers=workers,
        envs_per_worker=envs_per_worker,
        episode_length=episode_length,
        recv=recv,  # type: ignore[arg-type]
        backend=backend,  # type: ignore[arg-type]
        worker_timeout=20.0,
    )


class GoalSeeker:
    """Moves straight to a fixed point (no noise): Navigation2D episodes end early."""

    action_dim = 2

    def __init__(self, target: tuple[float, float]) -> None:
        self.target = np.asarray(target)

    def with_noise(self, obs: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (self.target - obs).astype(np.float32), np.zeros(len(obs), np.float32)
