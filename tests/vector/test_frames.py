"""Frame stacks in rings: the stacks a vector env assembles from the newest frames
equal Gymnasium's `FrameStackObservation` frame for frame, in every autoreset mode,
padding and backend, full steps and partial send/recv; the wrapper's own step is
bypassed; what the caller holds never changes under it."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from pararl.vector import ParallelVectorEnv, SerialVectorEnv
from pararl.vector.core import BatchVectorEnv

N = 4


class Counter(gym.Env[np.ndarray, int]):
    """Frames that tell where they came from: every pixel of env `i`'s frame `t` of
    episode `e` encodes (i, e, t); episodes of 3 to 7 steps (terminated or truncated)."""

    observation_space = gym.spaces.Box(0, 255, (2, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, index: int) -> None:
        self.index, self.episode, self.t, self.length = index, -1, 0, 3

    def _frame(self) -> np.ndarray:
        frame = np.full((2, 3), 40 * self.index + 7 * self.episode + self.t, np.int64)
        return (frame % 251).astype(np.uint8)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.episode, self.t = self.episode + 1, 0
        self.length = 3 + (self.index + self.episode) % 5
        return self._frame(), {"episode": self.episode}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1 + int(action)
        ended = self.t >= self.length
        terminated = ended and self.episode % 2 == 0
        return self._frame(), float(self.t), terminated, ended and not terminated, {}


def stacked(index: int, padding: Any = "reset") -> gym.Env[np.ndarray, int]:
    return gym.wrappers.FrameStackObservation(Counter(index), 4, padding_type=padding)


PADDINGS = {
    "reset": "reset",
    "zero": "zero",
    "custom": np.full((2, 3), 9, np.uint8),
}


def make(backend: str, fns: list[Any], **kwargs: Any) -> BatchVectorEnv:
    if backend == "serial":
        return SerialVectorEnv(fns, **kwargs)
    return ParallelVectorEnv(fns, num_workers=2, **kwargs)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype
    return bool(a == b)


@pytest.mark.parametrize("backend", ["serial", "parallel"])
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("padding", list(PADDINGS))
def test_stacks_equal_the_wrappers(backend: str, mode: AutoresetMode, padding: str) -> None:
    fns = [functools.partial(stacked, i, PADDINGS[padding]) for i in range(N)]
    ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
    env = make(backend, fns, autoreset_mode=mode)
    try:
        assert same(ref.reset(seed=1)[0], env.reset(seed=1)[0])
        rng = np.random.default_rng(0)
        finals = 0
        for _ in range(40):
            actions = rng.integers(0, 2, N)
            want, got = ref.step(actions), env.step(actions)
            for a, b in zip(want[:4], got[:4], strict=True):
                assert same(a, b)
            if "final_obs" in want[4]:
                finals += int(want[4]["_final_obs"].sum())
                assert same(want[4]["_final_obs"], got[4]["_final_obs"])
                for a, b in zip(want[4]["final_obs"], got[4]["final_obs"], strict=True):
                    assert (a is None and b is None) or same(a, b)
        assert mode is AutoresetMode.NEXT_STEP or finals > 5
    finally:
        env.close()


def test_reset_mask_refills_only_the_masked_rings() -> None:
    fns = [functools.partial(stacked, i) for i in range(N)]
    mode = AutoresetMode.DISABLED
    ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
    env = make("parallel", fns, autoreset_mode=mode)
    try:
        ref.reset(seed=0)
        env.reset(seed=0)
        for _ in range(2):
            assert same(ref.step(np.zeros(N, np.int64))[0], env.step(np.zeros(N, np.int64))[0])
        mask = np.array([True, False, True, False])
        assert same(
            ref.reset(options={"reset_mask": mask})[0], env.reset(options={"reset_mask": mask})[0]
        )
        assert same(ref.step(np.ones(N, np.int64))[0], env.step(np.ones(N, np.int64))[0])
    finally:
        env.close()


@pytest.mark.parametrize("backend", ["serial", "parallel"])
def test_partial_recv_returns_each_envs_own_stack(backend: str) -> None:
    fns = [functools.partial(stacked, i) for i in range(N)]
    refs = [stacked(i) for i in range(N)]
    env = make(backend, fns, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        env.reset(seed=2)
        for i, ref in enumerate(refs):
            ref.reset(seed=2 + i)
        rng = np.random.default_rng(1)
        for _ in range(12):
            ids = np.sort(rng.choice(N, size=int(rng.integers(1, N + 1)), replace=False))
            actions = rng.integers(0, 2, ids.size)
            env.send(actions, ids)
            obs, _, _, _, _, back = env.recv()
            assert back.tolist() == ids.tolist()
            for row, i, action in zip(obs, ids.tolist(), actions.tolist(), strict=True):
                want, _, terminated, truncated, _ = refs[i].step(action)
                if terminated or truncated:
                    want, _ = refs[i].reset()
                assert same(want, row)
    finally:
        env.close()


@pytest.mark.parametrize("copy", [True, False])
def test_the_wrappers_step_is_bypassed_and_stacks_never_change_under_the_caller(
    copy: bool,
) -> None:
    envs = [stacked(i) for i in range(N)]

    def refuse(action: int) -> Any:
        raise AssertionError("the worker steps the env under the frame stack")

    for e in envs:
        e.step = refuse  # type: ignore[method-assign]
    env = SerialVectorEnv([functools.partial(lambda e: e, e) for e in envs], copy=copy)
    try:
        first, _ = env.reset(seed=0)
        kept = first.copy()
        second = env.step(np.ones(N, np.int64))[0]
        assert np.array_equal(first, kept)
        assert not np.array_equal(first, second)
        assert second.shape == (N, 4, 2, 3)
    finally:
        env.close()


def test_envs_that_stack_differently_are_refused_with_the_env_index() -> None:
    fns = [functools.partial(stacked, 0), functools.partial(stacked, 1, "zero")]
    with pytest.raises(RuntimeError, match="env 1 does not stack frames as env 0"):
        SerialVectorEnv(fns)
