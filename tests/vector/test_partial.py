"""Partial stepping (`send`/`recv`): whatever the recv policy and however the
workers' timing falls, every env's trajectory equals the serial twin's."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pararl.vector import AlreadyPendingCallError, NoAsyncCallError
from pararl.vector.core import BatchVectorEnv
from tests.vector.conftest import (
    START_METHODS,
    EnvFn,
    VecFactory,
    assert_tree_equal,
    registered_fn,
    sample_from,
    space_env_fn,
    stepcost_fns,
)

Step = tuple[Any, float, bool, bool, dict[str, Any]]  # one env's obs, reward, term, trunc, info

POLICIES: list[dict[str, Any]] = [
    {},  # wait for every env in flight
    {"min_envs": 1},
    {"min_envs": 3},
    {"timeout": 0.0005},
]


def heavy_tail_fns(n: int) -> list[EnvFn]:
    """StepCost envs with a heavy-tailed cost; the last env is slower, so that
    workers finish at different times."""
    fns = stepcost_fns(n - 1, cost_us=50, tail_alpha=1.5, episode_length=15)
    fns.append(registered_fn("pararl/StepCost-v0", cost_us=1000, tail_alpha=1.5, episode_length=15))
    return fns


def row(tree: Any, p: int) -> Any:
    if isinstance(tree, dict):
        return {k: row(v, p) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(row(v, p) for v in tree)
    return np.array(tree[p], copy=True)


def unbatch_info(infos: dict[str, Any], p: int) -> dict[str, Any]:
    """Env `p`'s own info dict back out of Gymnasium's batched layout (keys sorted:
    the batched key order depends on which env reported a key first)."""
    out: dict[str, Any] = {}
    for key, value in sorted(infos.items()):
        if key.startswith("_") or not infos[f"_{key}"][p]:
            continue
        out[key] = unbatch_info(value, p) if isinstance(value, dict) else value[p]
    return out


def action_streams(vec: BatchVectorEnv, seed: int) -> list[Callable[[], Any]]:
    """Env i's k-th action is the k-th draw of its own seeded stream, however the
    steps are interleaved."""
    rngs = [np.random.default_rng([seed, i]) for i in range(vec.num_envs)]
    return [functools.partial(sample_from, vec.single_action_space, rng) for rng in rngs]


def stack(actions: list[Any]) -> Any:
    if isinstance(actions[0], dict):
        return {k: stack([a[k] for a in actions]) for k in actions[0]}
    if isinstance(actions[0], tuple):
        return tuple(stack([a[i] for a in actions]) for i in range(len(actions[0])))
    return np.stack(actions)


def serial_trajectories(vec: BatchVectorEnv, seed: int, steps: int) -> list[list[Step]]:
    """Lockstep reference: every env stepped `steps` times with its action stream."""
    draw = action_streams(vec, seed)
    vec.reset(seed=seed)
    traj: list[list[Step]] = [[] for _ in range(vec.num_envs)]
    for _ in range(steps):
        obs, rew, term, trunc, infos = vec.step(stack([d() for d in draw]))
        for i in range(vec.num_envs):
            traj[i].append((row(obs, i), rew[i], term[i], trunc[i], unbatch_info(infos, i)))
    return traj


def partial_trajectories(
    vec: BatchVectorEnv, seed: int, steps: int, policy: dict[str, Any]
) -> tuple[list[list[Step]], int]:
    """Drive `vec` with send/recv: new actions go only to the envs just returned, in
    a shuffled order. Returns the trajectories and how many recvs returned only
    part of the envs in flight."""
    draw = action_streams(vec, seed)
    order = np.random.default_rng(seed)
    n = vec.num_envs
    vec.reset(seed=seed)
    traj: list[list[Step]] = [[] for _ in range(n)]
    partial_returns = 0

    def send(ids: np.ndarray) -> None:
        ids = order.permutation(ids)
        vec.send(stack([draw[i]() for i in ids]), ids)

    send(np.arange(n))
    while vec.in_flight.any():
        flying = int(vec.in_flight.sum())
        obs, rew, term, trunc, infos, ids = vec.recv(**policy)
        assert ids.dtype.kind == "i"
        assert ids.size > 0
        assert np.all(np.diff(ids) > 0), f"env_ids not ascending: {ids}"
        assert rew.shape == term.shape == trunc.shape == ids.shape
        assert not vec.in_flight[ids].any()
        if "min_envs" in policy:
            assert ids.size >= min(policy["min_envs"], flying)
        partial_returns += int(ids.size < flying)
        for p, i in enumerate(ids.tolist()):
            traj[i].append((row(obs, p), rew[p], term[p], trunc[p], unbatch_info(infos, p)))
        again = np.array([i for i in ids.tolist() if len(traj[i]) < steps], dtype=np.int64)
        if again.size:
            send(again)
    return traj, partial_returns


def assert_same_trajectories(got: list[list[Step]], want: list[list[Step]]) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert len(g) == len(w), f"env {i}: {len(g)} steps, expected {len(w)}"
        for k, (gs, ws) in enumerate(zip(g, w, strict=True)):
            assert_tree_equal(gs, ws, f"env {i} step {k}")


@pytest.mark.parametrize("method", START_METHODS)
def test_partial_stepping_matches_serial_twin(make_vec: VecFactory, method: str) -> None:
    """7 envs on 3 workers (3+2+2), under each start method: every recv policy under
    fork, and returning early (min_envs=1) under the others, whose workers differ only
    in how they start (the stepping is the same code; each policy costs a second of
    the envs' busy steps)."""
    steps, n = 32, 7  # episodes of 15 steps: each env crosses two ends
    fns = heavy_tail_fns(n)
    vec = make_vec("parallel", fns, num_workers=3, context=method)
    twin = make_vec("serial", fns)
    assert [len(r) for r in vec._transport.slices] == [3, 2, 2]
    for k, policy in enumerate(POLICIES):
        if method != "fork" and policy != {"min_envs": 1}:
            continue
        seed = 100 + k
        want = serial_trajectories(twin, seed, steps)
        ends = [sum(bool(s[2] or s[3]) for s in env) for env in want]
        assert min(ends) >= 2, "every env must cross episode ends"
        got, partial_returns = partial_trajectories(vec, seed, steps, policy)
        assert_same_trajectories(got, want)
        if policy.get("min_envs") == 1:
            assert partial_returns > 0, "recv(min_envs=1) never returned early"
    # after the partial rounds, full steps still work and agree
    assert_tree_equal(vec.reset(seed=9), twin.reset(seed=9))
    actions = np.arange(n) % 2
    assert_tree_equal(vec.step(actions), twin.step(actions))


@pytest.mark.parametrize("kind", ["dict", "tuple"])
def test_partial_stepping_structured_spaces(make_vec: VecFactory, kind: str) -> None:
    """Partial results of Dict/Tuple spaces, with rich infos, by position."""
    fns = [space_env_fn(kind) for _ in range(5)]
    vec = make_vec("parallel", fns, num_workers=2)
    twin = make_vec("serial", fns)
    want = serial_trajectories(twin, 3, 20)
    for policy in ({"min_envs": 1}, {"timeout": 0.0005}):
        got, _ = partial_trajectories(vec, 3, 20, policy)
        assert_same_trajectories(got, want)
    # the serial twin's own send/recv takes the same path
    got, _ = partial_trajectories(twin, 3, 20, {"min_envs": 1})
    assert_same_trajectories(got, want)


@pytest.mark.parametrize("backend", ["parallel", "serial"])
def test_send_to_env_in_flight_raises(make_vec: VecFactory, backend: str) -> None:
    vec = make_vec(backend, stepcost_fns(4))
    vec.reset(seed=0)
    with pytest.raises(NoAsyncCallError):
        vec.recv()
    vec.send(np.array([1]), [3])
    assert vec.in_flight.tolist() == [False, False, False, True]
    with pytest.raises(AlreadyPendingCallError, match=r"\[3\]"):
        vec.send(np.array([0]), [3])
    with pytest.raises(AlreadyPendingCallError, match=r"\[3\]"):
        vec.send(np.array([0, 1]), [2, 3])
    assert vec.in_flight.tolist() == [False, False, False, True]  # env 2 was not sent
    with pytest.raises(AlreadyPendingCallError):
        vec.step_async(np.zeros(4, dtype=np.int64))
    vec.send(np.array([0, 1]), [2, 0])  # other envs may join while 3 is in flight
    seen: list[int] = []
    while vec.in_flight.any():
        seen += vec.recv()[5].tolist()
    assert sorted(seen) == [0, 2, 3]
    with pytest.raises(NoAsyncCallError):
        vec.recv()
    vec.send(np.array([1]), [3])  # back: it may be sent again
    assert vec.recv()[5].tolist() == [3]


@pytest.mark.parametrize("backend", ["parallel", "serial"])
def test_send_validates_env_ids(make_vec: VecFactory, backend: str) -> None:
    vec = make_vec(backend, stepcost_fns(3))
    vec.reset(seed=0)
    with pytest.raises(IndexError):
        vec.send(np.array([1]), [3])
    with pytest.raises(IndexError):
        vec.send(np.array([1]), [-1])
    with pytest.raises(ValueError, match="unique"):
        vec.send(np.array([1, 1]), [1, 1])
    assert not vec.in_flight.any()
    vec.send(np.array([1, 0, 1]))  # env_ids=None: all
    assert vec.recv()[5].tolist() == [0, 1, 2]


@pytest.mark.parametrize("backend", ["parallel", "serial"])
def test_recv_results_are_copies(make_vec: VecFactory, backend: str) -> None:
    vec = make_vec(backend, stepcost_fns(4))
    vec.reset(seed=0)
    vec.send(np.ones(4, dtype=np.int64))
    obs, rew, *_ = vec.recv()
    saved = obs.copy(), rew.copy()
    for _ in range(3):
        vec.send(np.ones(4, dtype=np.int64))
        later, *_ = vec.recv()
    np.testing.assert_array_equal(obs, saved[0])
    np.testing.assert_array_equal(rew, saved[1])
    assert not np.array_equal(later, saved[0])  # the envs did move on


@pytest.mark.parametrize("backend", ["parallel", "serial"])
def test_returned_env_ids_are_the_callers(make_vec: VecFactory, backend: str) -> None:
    """Changing the env ids recv returned (one whole worker's: the fast path) does
    not change which envs the next full step or recv reports."""
    vec = make_vec(backend, stepcost_fns(4))
    vec.reset(seed=0)
    for _ in range(2):
        vec.send(np.ones(4, dtype=np.int64))
        ids = vec.recv()[5]
        assert ids.tolist() == [0, 1, 2, 3]
        ids[:] = 0
    vec.send(np.ones(2, dtype=np.int64), [2, 3])
    first = vec.recv()[5]
    assert first.tolist() == [2, 3]
    first += 5
    vec.send(np.ones(2, dtype=np.int64), [3, 2])
    assert vec.recv()[5].tolist() == [2, 3]
