"""Meta-RL tasks: `reset_task` and `call_each` give each env its own argument."""

from __future__ import annotations

import numpy as np
import pytest

from tests.vector.conftest import BACKENDS, TaskEnv, VecFactory

N = 5  # on 2 workers: envs 0-2 and 3-4


@pytest.mark.parametrize("backend", BACKENDS)
def test_reset_task_gives_each_env_its_task(make_vec: VecFactory, backend: str) -> None:
    vec = make_vec(backend, [TaskEnv] * N)
    vec.reset(seed=0)
    tasks = vec.call("sample_tasks", N)[0]
    assert len({t["goal"] for t in tasks}) == N
    vec.reset_task(tasks)
    assert vec.get_attr("task") == tuple(tasks)
    obs, _ = vec.reset()
    np.testing.assert_array_equal(obs[:, 0], [t["goal"] for t in tasks])

    # a subset, out of order, spread over both workers
    new = [{"goal": 100.0}, {"goal": 200.0}, {"goal": 300.0}]
    vec.reset_task(new, env_ids=[4, 0, 2])
    got = vec.get_attr("task")
    assert got == (new[1], tasks[1], new[2], tasks[3], new[0])

    # a subset within one worker
    vec.reset_task([{"goal": -1.0}], env_ids=[1])
    assert vec.get_attr("task")[1] == {"goal": -1.0}
    assert vec.get_attr("task")[0] == new[1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_call_each_returns_in_env_ids_order(make_vec: VecFactory, backend: str) -> None:
    vec = make_vec(backend, [TaskEnv] * N)
    vec.reset(seed=0)
    results = vec.call_each("reset_task", [{"goal": 1.0}, {"goal": 2.0}], env_ids=[3, 1])
    assert results == ("goal=1.000", "goal=2.000")
    assert [t and t["goal"] for t in vec.get_attr("task")] == [None, 2.0, None, 1.0, None]
    everyone = vec.call_each("reset_task", [{"goal": float(i)} for i in range(N)])
    assert everyone == tuple(f"goal={i:.3f}" for i in range(N))
    with pytest.raises(ValueError, match="arguments"):
        vec.call_each("reset_task", [{"goal": 1.0}], env_ids=[0, 1])
    with pytest.raises(ValueError, match="arguments"):
        vec.reset_task([{"goal": 1.0}] * (N - 1))
    vec.step(np.zeros(N, dtype=np.int64))  # still usable
