"""Shared-memory hygiene: nothing is ever left in /dev/shm (the shared block is
unlinked as soon as it is mapped), whatever happens to the processes."""

from __future__ import annotations

import gc
import os
import signal

import numpy as np
import pytest

from pararl.vector import ParallelVectorEnv, WorkerError
from tests.vector.conftest import (
    VecFactory,
    alive_after,
    new_shm_entries,
    shm_entries,
    space_env_fn,
    stepcost_fns,
    with_faulty,
)

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("shm_guard")]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_create_step_close_leaves_no_entry(make_vec: VecFactory, method: str) -> None:
    before = shm_entries()
    vec = make_vec("parallel", [space_env_fn("dict") for _ in range(3)], context=method)
    vec.reset(seed=0)
    for _ in range(5):
        vec.step(vec.action_space.sample())
    assert new_shm_entries(before) == set()  # not even while running
    vec.close()


def test_worker_error_leaves_no_entry(make_vec: VecFactory) -> None:
    vec = make_vec("parallel", with_faulty(4, 3, fail_on="step", at=2))
    vec.reset(seed=0)
    vec.step(np.zeros(4, dtype=np.int64))
    with pytest.raises(WorkerError):
        vec.step(np.zeros(4, dtype=np.int64))


def test_killed_worker_leaves_no_entry(make_vec: VecFactory) -> None:
    vec = make_vec("parallel", stepcost_fns(4))
    vec.reset(seed=0)
    os.kill(vec.worker_pids[0], signal.SIGKILL)
    assert alive_after(vec.worker_pids[:1], 5.0) == []
    with pytest.raises(WorkerError):
        vec.step(np.zeros(4, dtype=np.int64))


def test_garbage_collection_leaves_no_entry() -> None:
    vec = ParallelVectorEnv(stepcost_fns(4), num_workers=2)
    vec.reset(seed=0)
    pids = vec.worker_pids
    del vec
    gc.collect()
    assert alive_after(pids, 1.5) == []
