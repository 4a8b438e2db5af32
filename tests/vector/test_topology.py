"""Worker counts and env splits."""

from __future__ import annotations

import gc
import os

import pytest

from pararl.mp.topology import available_cpus, split_evenly
from pararl.vector import ParallelVectorEnv, default_num_workers, physical_cores
from tests.vector.conftest import stepcost_fns


@pytest.mark.parametrize("num_items", [0, 1, 2, 3, 7, 8, 64, 101])
@pytest.mark.parametrize("num_parts", [1, 2, 3, 5, 8, 16])
def test_split_evenly_covers_each_index_once(num_items: int, num_parts: int) -> None:
    parts = split_evenly(num_items, num_parts)
    assert len(parts) == num_parts
    flat = [i for part in parts for i in part]
    assert flat == list(range(num_items))  # contiguous, in order, each index once
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 1
    assert all(part.step == 1 for part in parts)


@pytest.mark.parametrize("num_parts", [0, -1])
def test_split_evenly_rejects_no_parts(num_parts: int) -> None:
    with pytest.raises(ValueError, match="num_parts"):
        split_evenly(4, num_parts)


def test_physical_cores_within_affinity() -> None:
    cores = physical_cores()
    assert 1 <= cores <= len(os.sched_getaffinity(0))
    assert available_cpus() == sorted(os.sched_getaffinity(0))


def test_physical_cores_follows_the_affinity_mask() -> None:
    mask = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(mask)})
        assert physical_cores() == 1
        assert default_num_workers(8) == 1
    finally:
        os.sched_setaffinity(0, mask)
    assert os.sched_getaffinity(0) == mask


@pytest.mark.parametrize("num_envs", [1, 2, 3, 5, 64])
def test_default_num_workers_never_exceeds_envs(num_envs: int) -> None:
    workers = default_num_workers(num_envs)
    assert 1 <= workers <= num_envs
    assert workers == min(physical_cores(), num_envs)


@pytest.mark.parametrize("num_envs", [1, 3])
def test_parallel_env_default_workers(num_envs: int) -> None:
    vec = ParallelVectorEnv(stepcost_fns(num_envs))
    try:
        assert vec.num_workers == min(physical_cores(), num_envs)
        assert len(vec.worker_pids) == vec.num_workers
        assert sum(len(r) for r in vec._transport.slices) == num_envs
    finally:
        vec.close()


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("num_workers", [0, -1, 4])
def test_invalid_num_workers(num_workers: int) -> None:
    with pytest.raises(ValueError, match="num_workers"):
        ParallelVectorEnv(stepcost_fns(3), num_workers=num_workers)
    gc.collect()  # the half-built env's __del__ must not fail either


def test_no_env_fns() -> None:
    with pytest.raises(ValueError, match="env_fns"):
        ParallelVectorEnv([], num_workers=1)
