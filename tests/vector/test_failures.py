"""Failures in workers: reported as `WorkerError` promptly, never a hang, and the
vector env is then closed with every worker process gone."""

from __future__ import annotations

import functools
import gc
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import gymnasium as gym
import numpy as np
import pytest

from pararl.envs.fake import StepCostEnv
from pararl.vector import (
    ClosedEnvironmentError,
    ParallelVectorEnv,
    WorkerError,
    WorkerTimeoutError,
)
from pararl.vector.core import BatchVectorEnv
from tests.vector.conftest import (
    VecFactory,
    alive_after,
    descendants,
    mp_helper_pids,
    pid_alive,
    stepcost_fns,
    with_faulty,
)

pytestmark = pytest.mark.timeout(30)

DETECT_S = 1.5  # a failure must surface within this long
N, FAULTY, FAULTY_WORKER = 4, 3, 1  # 2 workers: envs 0-1 on worker 0, 2-3 on worker 1
ACTIONS = np.zeros(N, dtype=np.int64)


@contextmanager
def within(seconds: float) -> Iterator[None]:
    start = time.monotonic()
    yield
    elapsed = time.monotonic() - start
    assert elapsed < seconds, f"took {elapsed:.2f} s, more than {seconds} s"


def assert_torn_down(vec: BatchVectorEnv, pids: list[int]) -> None:
    """Closed, every worker gone (at once: close reaps them), and close() again is
    harmless."""
    assert vec.closed
    assert [pid for pid in pids if pid_alive(pid)] == []
    vec.close()
    with pytest.raises(ClosedEnvironmentError):
        vec.step(ACTIONS)


# --- exceptions in envs -----------------------------------------------------------------


@pytest.mark.parametrize("fail_on", ["step", "reset"])
def test_env_exception_becomes_worker_error(make_vec: VecFactory, fail_on: str) -> None:
    fns = with_faulty(N, FAULTY, fail_on=fail_on, at=2 if fail_on == "step" else 1)
    vec = make_vec("parallel", fns)
    pids = vec.worker_pids
    if fail_on == "step":
        vec.reset(seed=0)
        vec.step(ACTIONS)
    failing_call = (lambda: vec.step(ACTIONS)) if fail_on == "step" else (lambda: vec.reset(seed=0))
    with within(DETECT_S), pytest.raises(WorkerError) as info:
        failing_call()
    err = info.value
    assert not isinstance(err, WorkerTimeoutError)
    assert (err.worker, err.env_index, err.exitcode) == (FAULTY_WORKER, FAULTY, None)
    assert err.remote_traceback is not None
    assert f"FaultyEnv failed on {fail_on} #" in err.remote_traceback
    assert "RuntimeError" in err.remote_traceback
    assert f"worker {FAULTY_WORKER}, env {FAULTY}" in str(err)
    assert_torn_down(vec, pids)


def test_exception_in_autoreset_names_the_env(make_vec: VecFactory) -> None:
    """A reset that NEXT_STEP autoreset runs inside step() fails like a step."""
    vec = make_vec("parallel", with_faulty(N, FAULTY, fail_on="reset", at=2))
    pids = vec.worker_pids
    vec.set_attr("episode_length", 2)
    vec.reset(seed=0)
    vec.step(ACTIONS)
    _, _, term, trunc, _ = vec.step(ACTIONS)
    assert term[FAULTY] or trunc[FAULTY]
    with within(DETECT_S), pytest.raises(WorkerError) as info:
        vec.step(ACTIONS)
    assert (info.value.worker, info.value.env_index) == (FAULTY_WORKER, FAULTY)
    assert "FaultyEnv failed on reset #2" in (info.value.remote_traceback or "")
    assert_torn_down(vec, pids)


def test_failure_during_partial_recv(make_vec: VecFactory) -> None:
    vec = make_vec("parallel", with_faulty(N, FAULTY, fail_on="step", at=1))
    pids = vec.worker_pids
    vec.reset(seed=0)
    vec.send(np.zeros(2, dtype=np.int64), [0, 1])
    vec.recv()
    vec.send(np.zeros(1, dtype=np.int64), [FAULTY])
    with within(DETECT_S), pytest.raises(WorkerError) as info:
        vec.recv(min_envs=1)
    assert (info.value.worker, info.value.env_index) == (FAULTY_WORKER, FAULTY)
    assert_torn_down(vec, pids)


def test_serial_twin_raises_the_env_error_itself(make_vec: VecFactory) -> None:
    vec = make_vec("serial", with_faulty(N, FAULTY, fail_on="step", at=1))
    vec.reset(seed=0)
    with pytest.raises(RuntimeError, match="FaultyEnv failed on step #1") as info:
        vec.step(ACTIONS)
    assert f"(raised by env {FAULTY})" in "\n".join(getattr(info.value, "__notes__", []))


# --- dying and hanging workers ------------------------------------------------------


def test_worker_killed_while_idle(make_vec: VecFactory) -> None:
    vec = make_vec("parallel", stepcost_fns(N))
    pids = vec.worker_pids
    vec.reset(seed=0)
    os.kill(pids[1], signal.SIGKILL)
    assert alive_after([pids[1]], 5.0) == []
    with within(DETECT_S), pytest.raises(WorkerError) as info:
        vec.step(ACTIONS)
    err = info.value
    assert (err.worker, err.env_index, err.exitcode) == (1, None, -signal.SIGKILL)
    assert "SIGKILL" in str(err)
    assert_torn_down(vec, pids)


def test_worker_killed_while_stepping(make_vec: VecFactory) -> None:
    vec = make_vec("parallel", with_faulty(N, FAULTY, fail_on="step", how="hang"))
    pids = vec.worker_pids
    vec.reset(seed=0)
    vec.step_async(ACTIONS)
    time.sleep(0.2)  # worker 1 is now inside the hanging step
    os.kill(pids[FAULTY_WORKER], signal.SIGKILL)
    with within(DETECT_S), pytest.raises(WorkerError) as info:
        vec.step_wait()
    assert (info.value.worker, info.value.exitcode) == (FAULTY_WORKER, -signal.SIGKILL)
    assert_torn_down(vec, pids)


@pytest.mark.parametrize(("how", "exitcode"), [("segfault", -signal.SIGSEGV), ("exit", 3)])
def test_worker_process_dies_in_env(make_vec: VecFactory, how: str, exitcode: int) -> None:
    vec = make_vec("parallel", with_faulty(N, FAULTY, fail_on="step", at=2, how=how))
    pids = vec.worker_pids
    vec.reset(seed=0)
    vec.step(ACTIONS)
    with within(DETECT_S), pytest.raises(WorkerError) as info:
        vec.step(ACTIONS)
    err = info.value
    assert (err.worker, err.exitcode) == (FAULTY_WORKER, exitcode)
    assert "died" in str(err)
    assert_torn_down(vec, pids)


def test_hanging_env_raises_worker_timeout(make_vec: VecFactory) -> None:
    vec = make_vec(
        "parallel", with_faulty(N, FAULTY, fail_on="step", how="hang"), worker_timeout=0.5
    )
    pids = vec.worker_pids
    vec.reset(seed=0)
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError) as info:
        vec.step(ACTIONS)
    elapsed = time.monotonic() - start
    assert 0.45 <= elapsed < 0.5 + DETECT_S
    assert info.value.worker == FAULTY_WORKER
    assert isinstance(info.value, WorkerError)
    assert isinstance(info.value, TimeoutError)
    # where it hangs: the worker's stack when the wait ended, from faulthandler
    stack = info.value.remote_traceback or ""
    assert "most recent call first" in stack
    assert "in _maybe_fail" in stack
    assert "in step" in stack
    assert f"--- traceback in worker {FAULTY_WORKER} ---" in str(info.value)
    assert_torn_down(vec, pids)


def test_hung_worker_caught_while_others_keep_replying(make_vec: VecFactory) -> None:
    """worker_timeout is per worker: under partial stepping, worker 0 answering
    again and again must not hide that worker 1 hangs."""
    vec = make_vec(
        "parallel", with_faulty(N, FAULTY, fail_on="step", how="hang"), worker_timeout=0.5
    )
    pids = vec.worker_pids
    vec.reset(seed=0)
    vec.send(ACTIONS)
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError) as info:  # noqa: PT012 - a send/recv loop
        while time.monotonic() - start < 10.0:
            ids = vec.recv(min_envs=1)[5]
            assert ids.tolist() == [0, 1]
            vec.send(ACTIONS[ids], ids)
    assert time.monotonic() - start < 0.5 + DETECT_S
    assert info.value.worker == FAULTY_WORKER
    assert_torn_down(vec, pids)


# --- construction -------------------------------------------------------------------


def refuse_to_build(parent: int | None = None) -> gym.Env:
    """An env factory that fails (only in worker processes when `parent` is set)."""
    if parent is None or os.getpid() != parent:
        raise ValueError("no simulator licence available")
    return StepCostEnv()


@pytest.mark.parametrize("bad", [0, 2])
def test_env_construction_error_names_the_env(bad: int) -> None:
    before = descendants()
    fns = stepcost_fns(N)
    # env 0 is also built in this process (for the spaces): make it fail only in workers
    fns[bad] = functools.partial(refuse_to_build, os.getpid() if bad == 0 else None)
    with within(DETECT_S + 1.0), pytest.raises(WorkerError) as info:
        ParallelVectorEnv(fns, num_workers=2)
    err = info.value
    assert err.env_index == bad
    assert err.worker == (0 if bad < 2 else 1)
    assert f"env {bad}" in str(err)
    assert "no simulator licence available" in (err.remote_traceback or "")
    assert alive_after(list(descendants() - before - mp_helper_pids()), 2.0) == []


def build_forever(parent: int) -> gym.Env:
    """An env factory that never returns in a worker process (a simulator that waits
    for a licence server, say)."""
    if os.getpid() != parent:
        time.sleep(3600)
    return StepCostEnv()


def test_a_worker_stuck_building_its_envs_is_reported_with_its_stack() -> None:
    before = descendants()
    fns = stepcost_fns(N)
    fns[3] = functools.partial(build_forever, os.getpid())
    with within(1.0 + DETECT_S + 1.0), pytest.raises(WorkerTimeoutError) as info:
        ParallelVectorEnv(fns, num_workers=2, start_timeout=1.0)
    err = info.value
    assert err.worker == 1
    assert "not ready after 1.0 s" in str(err)
    assert "in build_forever" in (err.remote_traceback or "")
    assert alive_after(list(descendants() - before - mp_helper_pids()), 2.0) == []


# --- close and garbage collection ---------------------------------------------------


def test_close_is_idempotent(make_vec: VecFactory) -> None:
    vec = make_vec("parallel", stepcost_fns(N))
    pids = vec.worker_pids
    vec.reset(seed=0)
    vec.close()
    vec.close()
    assert_torn_down(vec, pids)


def test_close_with_a_hung_step_pending(make_vec: VecFactory) -> None:
    vec = make_vec("parallel", with_faulty(N, FAULTY, fail_on="step", how="hang"))
    pids = vec.worker_pids
    vec.reset(seed=0)
    vec.step_async(ACTIONS)
    with within(0.2 + DETECT_S):
        vec.close(timeout=0.2)
    assert_torn_down(vec, pids)


def _garbage_collected(build: Callable[[ParallelVectorEnv], None]) -> list[int]:
    vec = ParallelVectorEnv(stepcost_fns(N), num_workers=2)
    pids = vec.worker_pids
    build(vec)
    del vec
    gc.collect()
    return pids


def test_garbage_collection_without_close_stops_workers() -> None:
    pids = _garbage_collected(lambda vec: vec.reset(seed=0))
    assert alive_after(pids, DETECT_S) == []


def test_garbage_collection_with_a_step_in_flight() -> None:
    def start_step(vec: ParallelVectorEnv) -> None:
        vec.reset(seed=0)
        vec.step_async(ACTIONS)

    pids = _garbage_collected(start_step)
    assert alive_after(pids, DETECT_S) == []


# --- factories that cannot travel -----------------------------------------------------


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_unpicklable_factory_is_named(method: str) -> None:
    lock = threading.Lock()

    def locked_env() -> gym.Env:
        with lock:
            return StepCostEnv()

    before = descendants()
    fns = [*stepcost_fns(3), locked_env]
    with pytest.raises(ValueError, match="env factory 3") as info:
        ParallelVectorEnv(fns, num_workers=2, context=method)
    assert method in str(info.value)
    assert "lock" in str(info.value)
    assert descendants() - before - mp_helper_pids() == set()  # nothing was started
    # fork needs no pickling: the same factories work there
    vec = ParallelVectorEnv(fns, num_workers=2, context="fork")
    try:
        vec.reset(seed=0)
        vec.step(ACTIONS)
    finally:
        vec.close()
