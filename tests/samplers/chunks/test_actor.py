"""Actors' frame chunks: an actor on a FrameStackObservation env sends each frame
once, through the shared-memory outbox unchanged, and the frame memory rebuilds
exactly the transitions (and Ape-X priorities) an actor sending whole
observations gives the naive memory."""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing as mp
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl.algos.dqn import EpsilonGreedy, EpsilonSchedule
from pararl.models import QNetwork
from pararl.mp.shared import SharedArrays
from pararl.replay.frame_memory import FrameReplay
from pararl.replay.frame_steps import FrameSteps, frame_count, stack_size
from pararl.replay.nstep import Transitions
from pararl.replay.prioritized import PrioritizedReplay
from pararl.replay.uniform import ReplayBuffer
from pararl.samplers.chunks.actor import outbox_specs, read_slot, write_slot
from pararl.samplers.chunks.actor_pool import ActorPool
from pararl.samplers.chunks.sampler import ActorSpec, ChunkSampler
from pararl.samplers.chunks.source import Chunk
from tests.procs import alive_after

STACK = 3


class Counter(gym.Env[np.ndarray, int]):
    """6x6 frames that name themselves (env, episode, step); episodes of 3-9 steps."""

    observation_space = gym.spaces.Box(0, 255, (6, 6), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def __init__(self) -> None:
        self.env_id, self.episode, self.t, self.length = 0, 0, 0, 0

    def _frame(self) -> np.ndarray:
        frame = np.zeros((6, 6), np.uint8)
        frame[0, :3] = (self.env_id, self.episode % 256, self.t)
        return frame

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.env_id = seed % 256
        self.episode += 1
        self.t, self.length = 0, int(self.np_random.integers(3, 10))
        return self._frame(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._frame(), float(action) - 1.0, self.t >= self.length, False, {}


def make_env() -> gym.Env:
    env = gym.wrappers.TimeLimit(Counter(), max_episode_steps=7)  # truncation as well
    return gym.wrappers.FrameStackObservation(env, STACK)


MAKE_Q = functools.partial(QNetwork, STACK * 36, 3, (16,))


def spec(frame_stack: int) -> ActorSpec:
    return ActorSpec(
        env_fn=make_env,
        num_envs=3,
        obs_shape=(STACK, 6, 6),
        obs_dtype=np.dtype(np.uint8),
        policy=EpsilonGreedy(MAKE_Q, EpsilonSchedule(0.5, 0.5, 1), apex=True),
        n_step=3,
        gamma=0.9,
        chunk_steps=5,
        sync_every=1,
        frame_stack=frame_stack,
    )


def sampler(frame_stack: int) -> ChunkSampler:
    torch.manual_seed(0)
    return ChunkSampler(spec(frame_stack), seed=7, path=(0, 0, 0))


def test_the_stack_of_the_env_is_found() -> None:
    assert stack_size(make_env()) == STACK


def test_frame_chunks_rebuild_the_naive_transitions() -> None:
    frames, naive = sampler(STACK), sampler(0)
    memory = FrameReplay(1_000, (STACK, 6, 6))
    reference: dict[bytes, Transitions] = {}
    try:
        for _ in range(8):
            chunk, _, _ = frames.sample(lambda: 0)
            whole, _, _ = naive.sample(lambda: 0)
            assert isinstance(chunk, FrameSteps)
            assert isinstance(whole, Transitions)
            assert chunk.num_frames <= spec(STACK).frame_capacity
            memory.add(chunk)
            for i in range(len(whole)):
                reference[whole.obs[i].astype(np.uint8).tobytes()] = whole.rows(slice(i, i + 1))
    finally:
        frames.close()
        naive.close()
    slots = np.arange(memory.size)
    got = memory.gather(slots[memory.valid(slots)])
    assert len(got) == len(reference) > 50  # the same transitions, all of them
    for i in range(len(got)):
        want = reference[got.obs[i].tobytes()]
        np.testing.assert_array_equal(got.next_obs[i], want.next_obs[0])
        assert (got.action[i], got.ret[i], got.discount[i]) == (
            want.action[0],
            np.float32(want.ret[0]),
            np.float32(want.discount[0]),
        )


def test_actor_priorities_match_between_chunk_kinds() -> None:
    frames, naive = sampler(STACK), sampler(0)
    try:
        chunk, _, _ = frames.sample(lambda: 0)
        whole, _, _ = naive.sample(lambda: 0)
    finally:
        frames.close()
        naive.close()
    assert chunk.priority is not None
    assert whole.priority is not None
    assert (whole.priority >= 0).all()
    assert whole.priority.max() > 0
    np.testing.assert_allclose(np.sort(chunk.priority), np.sort(whole.priority), rtol=1e-5)


def test_outbox_carries_chunks_unchanged() -> None:
    for frame_stack in (STACK, 0):
        actor = sampler(frame_stack)
        try:
            batch, _, _ = actor.sample(lambda: 0)
        finally:
            actor.close()
        shared = SharedArrays(outbox_specs(2, spec(frame_stack)), mp.get_context())
        write_slot(shared.arrays, 2, 1, batch)
        chunk = Chunk(1, len(batch), 15, 0, [], 0.0, frame_count(batch))
        back = read_slot(shared.arrays, 2, 1, chunk)
        assert type(back) is type(batch)
        for name, value in vars(batch).items():
            if value is None:  # a field this chunk has not (masks of an env without)
                assert getattr(back, name) is None, name
                continue
            np.testing.assert_allclose(getattr(back, name), value, rtol=1e-6)
        if frame_stack == 0:  # the naive kind still fits the naive memory
            ReplayBuffer(64, (STACK, 6, 6), np.uint8).add(back)  # type: ignore[arg-type]


def frame_ids(stacks: np.ndarray) -> np.ndarray:
    """(env, episode, step) of every frame of [B, S, 6, 6] stacks: [B, S, 3]."""
    return stacks[:, :, 0, :3].astype(np.int64)


def test_actor_processes_send_frames_the_memory_stacks_rightly() -> None:
    """Two actor processes (Ape-X: own epsilons, priorities) through their outboxes:
    every stack rebuilt is one env's one episode, steps consecutive, the episode's
    first frame repeated before its start; the next stack is 1 to n steps later."""
    n = spec(STACK).n_step
    specs = [
        dataclasses.replace(
            spec(STACK),
            stream_base=3 * i,
            policy=EpsilonGreedy(MAKE_Q, EpsilonSchedule(1, 1, 1), apex=True),
        )
        for i in range(2)
    ]
    torch.manual_seed(0)
    pool = ActorPool(specs, QNetwork(STACK * 36, 3, (16,)), version=0, seed=3, start_steps=0)
    replay = PrioritizedReplay(FrameReplay(400, (STACK, 6, 6)), alpha=0.6)
    try:
        deadline = time.monotonic() + 60
        while replay.added < 600 and time.monotonic() < deadline:
            for _, batch, _ in pool.chunks(wait=0.5):
                assert batch.priority is not None
                replay.add(batch)
    finally:
        pool.close()
    assert replay.added >= 600
    slots = np.arange(replay.memory.size)
    got = replay.memory.gather(slots[replay.memory.valid(slots)])
    obs, nxt = frame_ids(got.obs), frame_ids(got.next_obs)
    for ids in (obs, nxt):
        assert (ids[:, :, :2] == ids[:, -1:, :2]).all()  # one env, one episode
        t = ids[:, :, 2]
        expected = np.maximum(t[:, -1:] - np.arange(STACK - 1, -1, -1), 0)
        np.testing.assert_array_equal(t, expected)  # consecutive, padded at the start
    assert (obs[:, -1, :2] == nxt[:, -1, :2]).all()
    ahead = nxt[:, -1, 2] - obs[:, -1, 2]
    assert ((ahead >= 1) & (ahead <= n)).all()
    assert len(got) > 300


def test_a_resumed_pools_actors_act_where_the_run_is() -> None:
    """The actors read the run's env steps (epsilon, uniform first actions) from the
    shared counter: a resumed pool's holds the steps it resumes at from the start,
    before the learner takes any chunk (it held 0 until then, so the first chunks of
    a resumed run were acted as at its start)."""
    pool = ActorPool([spec(STACK)], QNetwork(STACK * 36, 3, (16,)), version=0, seed=3,
                     start_steps=50_000)  # fmt: skip
    try:
        assert int(pool.arrays["env_steps"][0]) == 50_000
    finally:
        pool.close()


class Stuck(gym.Wrapper[Any, Any, Any, Any]):
    """`make_env`'s env whose 40th step never returns (a native call that hangs)."""

    def __init__(self) -> None:
        super().__init__(make_env())
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps == 40:
            time.sleep(600)
        return super().step(action)


def test_an_actor_stuck_in_a_step_is_a_timeout_with_its_stack_not_a_hang() -> None:
    from pararl.mp.errors import WorkerTimeoutError

    stuck = dataclasses.replace(spec(STACK), env_fn=Stuck, num_envs=1)
    pool = ActorPool([stuck], MAKE_Q(), version=0, seed=3, start_steps=0, chunk_timeout_s=2.0)
    pids, taken = pool.group.pids, [0]

    def take_for_a_minute() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            taken[0] += sum(1 for _ in pool.chunks(wait=0.2))

    try:
        with pytest.raises(WorkerTimeoutError, match="sent no chunk in 2 s") as late:
            take_for_a_minute()
        assert taken[0] > 0  # it sent chunks before it got stuck
        assert "in step" in str(late.value)  # the stack: where it hangs
    finally:
        pool.close()
    assert alive_after(pids, 2.0) == []
