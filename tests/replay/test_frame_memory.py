"""The frame-deduplicated replay memory against the naive one: every transition it
can sample equals the one a naive memory of whole observations holds (episode
starts, n-step ends, truncation, termination), none whose frames were overwritten
by the ring is ever sampled, and none that should be is missing."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pararl.errors import UsageError
from pararl.replay.frame_memory import FrameReplay
from pararl.replay.frame_steps import FrameStepBuilder, FrameSteps, stack_size
from pararl.replay.nstep import NStepBuilder, Transitions
from pararl.replay.prioritized import PrioritizedReplay

FRAME = (2, 3)  # tiny frames; the first two bytes hold the frame's id


class StackedStreams:
    """`num_envs` envs in lock-step with NEXT_STEP autoreset, each observation a
    stack of its episode's last `stack` frames padded with the first (as
    FrameStackObservation's reset padding); every frame is unique (its id)."""

    def __init__(
        self, num_envs: int, stack: int, rng: np.random.Generator, ids: Iterator[int]
    ) -> None:
        self.num_envs, self.stack, self.rng, self.ids = num_envs, stack, rng, ids
        self.history: list[list[np.ndarray]] = [[] for _ in range(num_envs)]
        self.ended = np.zeros(num_envs, np.bool_)

    def _frame(self) -> np.ndarray:
        i = next(self.ids)
        frame = np.zeros(FRAME, np.uint8)
        frame.flat[:3] = (i % 256, i // 256 % 256, i // 65536)
        return frame

    def _obs(self, env: int) -> np.ndarray:
        frames = self.history[env][-self.stack :]
        pad = [frames[0]] * (self.stack - len(frames))
        return np.stack(pad + frames)

    def reset(self) -> np.ndarray:
        self.history = [[self._frame()] for _ in range(self.num_envs)]
        return np.stack([self._obs(e) for e in range(self.num_envs)])

    def step(self) -> tuple[np.ndarray, ...]:
        reward = self.rng.normal(size=self.num_envs).round(2)
        end = self.rng.random(self.num_envs) < 0.2
        term = end & (self.rng.random(self.num_envs) < 0.5)
        trunc = end & ~term
        for e in range(self.num_envs):
            if self.ended[e]:  # the reset step
                self.history[e] = [self._frame()]
                reward[e], term[e], trunc[e] = 0.0, False, False
            else:
                self.history[e].append(self._frame())
        self.ended = term | trunc
        obs = np.stack([self._obs(e) for e in range(self.num_envs)])
        return obs, reward, term, trunc


def key(obs: np.ndarray) -> bytes:
    return obs.tobytes()


def frame_id(frames: np.ndarray) -> np.ndarray:
    flat = frames.reshape(*frames.shape[: frames.ndim - 2], -1).astype(np.int64)
    return flat[..., 0] + 256 * flat[..., 1] + 65536 * flat[..., 2]


def fill(
    memory: FrameReplay | PrioritizedReplay,
    actors: int,
    envs: int,
    stack: int,
    n: int,
    steps: int,
    chunk: int,
    seed: int,
) -> dict[bytes, Transitions]:
    """Actors step their streams and hand chunks over in a random interleaving; the
    naive transitions (whole observations) come back, keyed by their observation."""
    rng = np.random.default_rng(seed)
    gamma = 0.9
    ids = itertools.count(1)  # frame ids unique over all actors
    streams = [StackedStreams(envs, stack, rng, ids) for _ in range(actors)]
    builders = [
        FrameStepBuilder(envs, (stack, *FRAME), n, gamma, stream_base=a * envs)
        for a in range(actors)
    ]
    naive = [NStepBuilder(envs, (stack, *FRAME), n, gamma, obs_dtype=np.uint8) for _ in streams]
    obs = [s.reset() for s in streams]
    for b, o in zip(builders, obs, strict=True):
        b.reset(o)
    reference: dict[bytes, Transitions] = {}
    pending: list[list[FrameSteps]] = [[] for _ in range(actors)]  # in order per actor
    for t in range(steps):
        for a in range(actors):
            action = rng.integers(0, 4, envs)
            next_obs, reward, term, trunc = streams[a].step()
            builders[a].add(obs[a], action, reward, next_obs, term, trunc)
            out = naive[a].add(obs[a], action, reward, next_obs, term, trunc)
            for i in range(len(out)):
                reference[key(out.obs[i])] = out.rows(slice(i, i + 1))
            obs[a] = next_obs
            if (t + 1) % chunk == 0 or t == steps - 1:
                pending[a].append(builders[a].chunk()[0])
        while rng.random() < 0.7:  # actors' chunks arrive interleaved in any order
            waiting = [q for q in pending if q]
            if not waiting:
                break
            memory.add(waiting[rng.integers(len(waiting))].pop(0))
    for queue in pending:
        for batch in queue:
            memory.add(batch)
    return reference


def check_every_slot(memory: FrameReplay, reference: dict[bytes, Transitions]) -> None:
    slots = np.arange(memory.size)
    valid = memory.valid(slots)
    held = set(frame_id(memory.frames[: memory.size]).tolist())
    got = memory.gather(slots[valid])
    seen = set()
    for i in range(len(got)):
        expected = reference[key(got.obs[i])]
        np.testing.assert_array_equal(got.next_obs[i], expected.next_obs[0])
        assert got.action[i] == expected.action[0]
        assert got.ret[i] == pytest.approx(expected.ret[0], abs=1e-5)
        assert got.discount[i] == pytest.approx(expected.discount[0], abs=1e-6)
        seen.add(key(got.obs[i]))
    # every naive transition whose frames are all still held is sampleable
    whole = {k for k, tr in reference.items() if set(frame_id(tr.obs[0]).tolist()) <= held}
    assert seen == whole
    assert len(memory) >= len(seen)


@settings(max_examples=50, deadline=None)
@given(
    actors=st.integers(1, 3),
    envs=st.integers(1, 3),
    stack=st.integers(1, 4),
    n=st.integers(1, 4),
    capacity=st.integers(8, 40),
    chunk=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_rebuilt_transitions_equal_the_naive_ones(
    actors: int, envs: int, stack: int, n: int, capacity: int, chunk: int, seed: int
) -> None:
    memory = FrameReplay(capacity, (stack, *FRAME))
    reference = fill(memory, actors, envs, stack, n, 40, chunk, seed)
    assert memory.written > capacity  # the ring wrapped
    check_every_slot(memory, reference)
    if memory.valid(np.arange(memory.size)).any():  # a tiny ring may hold none whole
        picks = memory.sample_slots(64, np.random.default_rng(seed))
        assert memory.valid(picks).all()


def test_episode_start_pads_with_its_first_frame() -> None:
    memory = FrameReplay(64, (4, *FRAME))
    reference = fill(memory, 1, 2, 4, 3, 30, 4, seed=1)
    check_every_slot(memory, reference)
    batch = memory.gather(np.flatnonzero(memory.valid(np.arange(memory.size))))
    ids = frame_id(batch.obs)
    starts = ids[:, 0] == ids[:, 1]  # padded stacks: the first frame repeated
    assert starts.any()
    assert (np.diff(ids, axis=1) >= 0).all()  # never a frame of an older episode


def test_checkpoint_round_trip() -> None:
    memory = FrameReplay(50, (3, *FRAME))
    fill(memory, 2, 2, 3, 3, 30, 3, seed=2)
    other = FrameReplay(50, (3, *FRAME))
    other.load_state_dict(memory.state_dict())
    assert len(other) == len(memory)
    a = memory.sample(32, np.random.default_rng(0))
    b = other.sample(32, np.random.default_rng(0))
    for name in ("obs", "action", "ret", "next_obs", "discount"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_memory_per_transition_is_about_one_frame() -> None:
    capacity = 2_000
    memory = FrameReplay(capacity, (4, 84, 84))
    assert memory.nbytes / capacity <= 1.1 * 84 * 84
    prioritized = PrioritizedReplay(FrameReplay(capacity, (4, 84, 84)), alpha=0.6)
    assert prioritized.nbytes / capacity <= 1.1 * 84 * 84


def test_a_capacity_beyond_memory_is_refused_with_the_bytes_needed() -> None:
    with pytest.raises(UsageError, match=r"needs [\d,]+ bytes") as info:
        FrameReplay(10**12, (4, 84, 84))
    assert "\n" not in str(info.value)


def test_stack_size_of_wrapped_envs() -> None:
    class Frames(gym.Env[np.ndarray, int]):
        observation_space = gym.spaces.Box(0, 255, (5, 5), np.uint8)
        action_space = gym.spaces.Discrete(2)

    assert stack_size(gym.wrappers.FrameStackObservation(Frames(), 4)) == 4
    zero = gym.wrappers.FrameStackObservation(Frames(), 4, padding_type="zero")
    assert stack_size(zero) == 0
    assert stack_size(Frames()) == 0
    scaled = gym.wrappers.TransformObservation(
        gym.wrappers.FrameStackObservation(Frames(), 4),
        lambda o: o // 2,
        gym.spaces.Box(0, 127, (4, 5, 5), np.uint8),
    )
    assert stack_size(scaled) == 0
