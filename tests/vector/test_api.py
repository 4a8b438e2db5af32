"""Gymnasium `VectorEnv` API: `ParallelVectorEnv` and `SerialVectorEnv` against
`gymnasium.vector.SyncVectorEnv`, with identical seeds and actions."""

from __future__ import annotations

import functools
import multiprocessing as mp
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import batch_space

from pararl.vector import (
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    NoAsyncCallError,
)
from tests.vector.conftest import (
    BACKENDS,
    SPACE_KINDS,
    EnvFn,
    SpaceEnv,
    VecFactory,
    assert_tree_equal,
    space_env_fn,
    stepcost_fns,
)

N_ENVS = 3
STEPS = 30  # episodes last <= 6 steps: every env ends several times


def space_fns(kind: str, n: int = N_ENVS) -> list[EnvFn]:
    return [space_env_fn(kind) for _ in range(n)]


SyncFactory = Callable[..., SyncVectorEnv]


@pytest.fixture
def sync_ref() -> Iterator[SyncFactory]:
    """Gymnasium's reference `SyncVectorEnv`, closed at teardown."""
    made: list[SyncVectorEnv] = []

    def make(env_fns: list[EnvFn], **kwargs: Any) -> SyncVectorEnv:
        env = SyncVectorEnv(env_fns, **kwargs)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


# --- spaces and metadata ------------------------------------------------------------


@pytest.mark.parametrize("kind", SPACE_KINDS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_spaces_and_metadata_match_sync(
    make_vec: VecFactory, sync_ref: SyncFactory, backend: str, kind: str
) -> None:
    fns = space_fns(kind)
    vec = make_vec(backend, fns, autoreset_mode=AutoresetMode.SAME_STEP)
    ref = sync_ref(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    assert vec.num_envs == ref.num_envs == N_ENVS
    assert vec.single_observation_space == ref.single_observation_space
    assert vec.single_action_space == ref.single_action_space
    assert vec.observation_space == ref.observation_space
    assert vec.action_space == ref.action_space
    assert vec.metadata == ref.metadata
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert vec.metadata["tag"] == "space-env"
    assert vec.render_mode is None
    # The batched spaces really describe what comes back.
    obs, _ = vec.reset(seed=0)
    assert vec.observation_space.contains(obs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_autoreset_mode_is_next_step(make_vec: VecFactory, backend: str) -> None:
    vec = make_vec(backend, space_fns("box", 2))
    assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert vec.autoreset_mode is AutoresetMode.NEXT_STEP


# --- rollouts ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.name)
@pytest.mark.parametrize("kind", SPACE_KINDS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_rollout_matches_sync(
    make_vec: VecFactory, sync_ref: SyncFactory, backend: str, kind: str, mode: AutoresetMode
) -> None:
    """Obs, rewards, terminations, truncations and infos (layout, masks, dtypes)
    equal SyncVectorEnv's, step for step, across many episode ends; in DISABLED
    mode ended envs are reset with `reset_mask` (and a seed)."""
    fns = space_fns(kind)
    vec = make_vec(backend, fns, autoreset_mode=mode)
    ref = sync_ref(fns, autoreset_mode=mode)
    assert_tree_equal(vec.reset(seed=11), ref.reset(seed=11))
    act_space = batch_space(ref.single_action_space, N_ENVS)
    act_space.seed(5)
    ends, final_obs_seen = 0, 0
    for step in range(STEPS):
        actions = act_space.sample()
        want = ref.step(actions)
        got = vec.step(actions)
        assert_tree_equal(got, want, f"step {step}")
        done = want[2] | want[3]
        ends += int(done.sum())
        final_obs_seen += int("final_obs" in want[4])
        mask = done.copy()
        if step == STEPS // 2:
            mask[0] = True  # a masked reset of an env that did not end, with options
        if (mode is AutoresetMode.DISABLED or step == STEPS // 2) and mask.any():
            # fresh dicts: SyncVectorEnv pops "reset_mask" out of the options it gets
            want_reset = ref.reset(seed=100 + step, options={"start_t": 2, "reset_mask": mask})
            got_reset = vec.reset(seed=100 + step, options={"start_t": 2, "reset_mask": mask})
            assert_tree_equal(got_reset, want_reset, f"masked reset after step {step}")
    assert ends >= 2 * N_ENVS, "the rollout must cross several episode ends"
    if mode is AutoresetMode.SAME_STEP:
        assert final_obs_seen > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_reset_seeds_each_env(make_vec: VecFactory, backend: str) -> None:
    """seed=s seeds env i with s+i; a list seeds env i with seeds[i]."""
    vec = make_vec(backend, space_fns("box"))

    def single(seed: int) -> np.ndarray:
        obs, _ = SpaceEnv("box").reset(seed=seed)
        return obs

    obs, _ = vec.reset(seed=7)
    for i in range(N_ENVS):
        np.testing.assert_array_equal(obs[i], single(7 + i))
    assert not np.array_equal(obs[0], obs[1])  # the seeds differ, so do the envs
    obs, _ = vec.reset(seed=[42, None, 3])
    np.testing.assert_array_equal(obs[0], single(42))
    np.testing.assert_array_equal(obs[2], single(3))
    with pytest.raises(ValueError, match="seeds"):
        vec.reset(seed=[1, 2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_reset_options_reach_every_env(
    make_vec: VecFactory, sync_ref: SyncFactory, backend: str
) -> None:
    fns = space_fns("tuple")
    vec = make_vec(backend, fns)
    ref = sync_ref(fns)
    got_obs, got_info = vec.reset(seed=3, options={"start_t": 4})
    want = ref.reset(seed=3, options={"start_t": 4})
    assert_tree_equal((got_obs, got_info), want)
    np.testing.assert_array_equal(got_info["options"]["start_t"], [4] * N_ENVS)
    actions = ref.action_space.sample()
    got = vec.step(actions)
    assert_tree_equal(got, ref.step(actions))
    np.testing.assert_array_equal(got[4]["t"], [5] * N_ENVS)


# --- async calls ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_async_calls_match_sync(make_vec: VecFactory, sync_ref: SyncFactory, backend: str) -> None:
    fns = space_fns("dict")
    vec = make_vec(backend, fns)
    ref = sync_ref(fns)
    vec.reset_async(seed=1, options={"start_t": 1})
    assert_tree_equal(vec.reset_wait(), ref.reset(seed=1, options={"start_t": 1}))
    act_space = batch_space(ref.single_action_space, N_ENVS)
    act_space.seed(2)
    for step in range(12):
        actions = act_space.sample()
        vec.step_async(actions)
        assert_tree_equal(vec.step_wait(timeout=30.0), ref.step(actions), f"step {step}")


def test_step_wait_timeout_then_wait_again(make_vec: VecFactory) -> None:
    """step_wait(timeout) raises multiprocessing.TimeoutError while the step runs and
    the step stays pending: a later step_wait returns its results."""
    vec = make_vec("parallel", stepcost_fns(2, cost_us=300_000))  # each step burns 0.3 s
    twin = make_vec("serial", stepcost_fns(2))  # the same observations, at no cost
    assert_tree_equal(vec.reset(seed=4), twin.reset(seed=4))
    actions = np.array([1, 0])
    vec.step_async(actions)
    with pytest.raises(mp.TimeoutError):
        vec.step_wait(timeout=0.01)
    with pytest.raises(AlreadyPendingCallError):
        vec.step_async(actions)
    assert_tree_equal(vec.step_wait(), twin.step(actions))


# --- call, attributes, render ----------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_call_get_attr_set_attr(make_vec: VecFactory, sync_ref: SyncFactory, backend: str) -> None:
    fns = space_fns("box")
    vec = make_vec(backend, fns)
    ref = sync_ref(fns)
    for env in (vec, ref):
        env.reset(seed=0)
        env.step(env.action_space.sample() * 0)
    assert vec.get_attr("episode_len") == ref.get_attr("episode_len") == (6, 6, 6)
    assert vec.get_attr("kind") == ("box",) * N_ENVS

    vec.set_attr("label", "same")
    assert vec.get_attr("label") == ("same",) * N_ENVS
    for values in (["a", "b", "c"], ("x", "y", "z")):
        vec.set_attr("label", values)
        ref.set_attr("label", values)
        assert vec.get_attr("label") == tuple(values)
    # args and kwargs reach every env; results come back in env order
    assert vec.call("scaled", 3, offset=1) == ref.call("scaled", 3, offset=1)
    assert vec.call("scaled", 3, offset=1) == ("x:4", "y:4", "z:4")
    assert vec.call("scaled", 2) == ("x:2", "y:2", "z:2")

    for wrong in (["only", "two"], ["1", "2", "3", "4"], []):
        with pytest.raises(ValueError, match="values"):
            vec.set_attr("label", wrong)
    assert vec.get_attr("label") == ("x", "y", "z")  # untouched, and still usable
    vec.step(vec.action_space.sample())


@pytest.mark.parametrize("backend", BACKENDS)
def test_render_rgb_array(make_vec: VecFactory, sync_ref: SyncFactory, backend: str) -> None:
    fns = [functools.partial(gym.make, "CartPole-v1", render_mode="rgb_array") for _ in range(2)]
    vec = make_vec(backend, fns)
    ref = sync_ref(fns)
    assert vec.render_mode == "rgb_array"
    assert vec.metadata["render_fps"] == ref.metadata["render_fps"]
    vec.reset(seed=9)
    ref.reset(seed=9)
    for _ in range(3):
        vec.step(np.array([1, 0]))
        ref.step(np.array([1, 0]))
    frames = vec.render()
    want = ref.render()
    assert isinstance(frames, tuple)
    assert len(frames) == 2
    for frame, expected in zip(frames, want, strict=True):
        assert frame.shape == (400, 600, 3)
        assert frame.dtype == np.uint8
        np.testing.assert_array_equal(frame, expected)
    assert not np.array_equal(frames[0], frames[1])  # different seeds, different carts


# --- misuse ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_misuse_errors(make_vec: VecFactory, backend: str) -> None:
    vec = make_vec(backend, stepcost_fns(3))
    actions = np.zeros(3, dtype=np.int64)
    with pytest.raises(NoAsyncCallError):
        vec.step_wait()
    with pytest.raises(NoAsyncCallError):
        vec.reset_wait()
    with pytest.raises(NoAsyncCallError):
        vec.recv()
    with pytest.raises(NoAsyncCallError):
        vec.call_wait()
    vec.reset(seed=0)
    vec.step_async(actions)
    with pytest.raises(AlreadyPendingCallError):
        vec.step_async(actions)
    with pytest.raises(AlreadyPendingCallError):
        vec.reset_async(seed=0)
    with pytest.raises(AlreadyPendingCallError):
        vec.call_async("episode_length")
    with pytest.raises(AlreadyPendingCallError):
        vec.send(actions)
    with pytest.raises(NoAsyncCallError):
        vec.reset_wait()
    vec.step_wait()  # the pending step is intact
    vec.reset_async(seed=1)
    with pytest.raises(NoAsyncCallError):
        vec.step_wait()
    vec.reset_wait()
    vec.step(actions)


@pytest.mark.parametrize("backend", BACKENDS)
def test_closed_env_refuses_every_call(make_vec: VecFactory, backend: str) -> None:
    vec = make_vec(backend, stepcost_fns(2))
    vec.reset(seed=0)
    vec.close()
    assert vec.closed
    actions = np.zeros(2, dtype=np.int64)
    calls = [
        lambda: vec.reset(seed=0),
        lambda: vec.reset_async(),
        lambda: vec.step(actions),
        lambda: vec.step_async(actions),
        lambda: vec.send(actions),
        lambda: vec.call("episode_length"),
        lambda: vec.get_attr("episode_length"),
        lambda: vec.set_attr("episode_length", 3),
        lambda: vec.call_each("reset_task", [1, 2]),
        lambda: vec.render(),
    ]
    for call in calls:
        with pytest.raises(ClosedEnvironmentError):
            call()


# --- returned observations are the caller's -------------------------------------------


@pytest.mark.parametrize("kind", ["box", "dict"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_true_results_do_not_change(make_vec: VecFactory, backend: str, kind: str) -> None:
    vec = make_vec(backend, space_fns(kind))
    vec.action_space.seed(0)
    first, _ = vec.reset(seed=0)
    first_snapshot = _deep_copy(first)
    obs, rew, term, trunc, _ = vec.step(vec.action_space.sample())
    snapshot = _deep_copy((obs, rew, term, trunc))
    later = vec.step(vec.action_space.sample())
    vec.step(vec.action_space.sample())
    assert_tree_equal((obs, rew, term, trunc), snapshot)
    assert_tree_equal(first, first_snapshot)
    # The test means something only if the envs' values did move on.
    assert not _tree_equal(later[0], snapshot[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_false_returns_the_live_buffer(make_vec: VecFactory, backend: str) -> None:
    vec = make_vec(backend, stepcost_fns(2), copy=False)
    obs0, _ = vec.reset(seed=0)
    obs1 = vec.step(np.ones(2, dtype=np.int64))[0]
    assert np.shares_memory(obs0, obs1)


def _deep_copy(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _deep_copy(v) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_deep_copy(v) for v in tree)
    return np.array(tree, copy=True)


def _tree_equal(a: Any, b: Any) -> bool:
    try:
        assert_tree_equal(a, b)
    except AssertionError:
        return False
    return True
