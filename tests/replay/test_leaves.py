"""Dict and Tuple observations in the off-policy path, held leaf by leaf: n-step
transitions of each leaf are those of the leaf alone, the replay ring stores, samples
and checkpoints each leaf, and an actor's shared-memory outbox carries them unchanged."""

from __future__ import annotations

import multiprocessing as mp

import gymnasium as gym
import numpy as np
import torch

from pararl import checkpoint
from pararl.algos.offpolicy import UniformFirst
from pararl.envs.make import env_factory
from pararl.models import squashed_actor
from pararl.mp.shared import SharedArrays
from pararl.observations import leaves
from pararl.replay.make import make_replay
from pararl.replay.nstep import NStepBuilder, Transitions
from pararl.replay.uniform import ReplayBuffer
from pararl.samplers.chunks.actor import _write_slot, outbox_specs, read_slot
from pararl.samplers.chunks.sampler import ActorSpec, ChunkSampler
from pararl.samplers.chunks.source import Chunk

SPACE = gym.spaces.Dict(
    {
        "pos": gym.spaces.Box(-10, 10, (2,), np.float32),
        "inner": gym.spaces.Tuple((gym.spaces.Discrete(5),)),
    }
)
LEAVES = leaves(SPACE)  # "inner.0", "pos"


def steps(builder: NStepBuilder, structured: bool) -> Transitions:
    """Two envs for 12 steps; env 0's episodes end every 4 steps (terminated), env
    1's every 5 (truncated); the observation is the step index."""
    parts = []
    for t in range(12):

        def obs(k: int) -> object:
            pos = np.full((2, 2), k, np.float32)
            if not structured:
                return pos
            return {"pos": pos, "inner": (np.full(2, k % 5, np.int64),)}

        term = np.array([t % 4 == 3, False])
        trunc = np.array([False, t % 5 == 4])
        reward = np.array([t, 10.0 * t])
        parts.append(builder.add(obs(t), np.array([t % 2, 1]), reward, obs(t + 1), term, trunc))
    return Transitions.concat(parts)


def test_n_step_transitions_of_a_leaf_are_the_leaf_alones() -> None:
    plain = steps(NStepBuilder(2, (2,), 3, 0.9), structured=False)
    by_leaf = steps(NStepBuilder(2, (), 3, 0.9, leaves=LEAVES), structured=True)
    assert sorted(by_leaf.obs) == sorted(by_leaf.next_obs) == ["inner.0", "pos"]
    np.testing.assert_array_equal(by_leaf.obs["pos"], plain.obs)
    np.testing.assert_array_equal(by_leaf.next_obs["pos"], plain.next_obs)
    np.testing.assert_array_equal(by_leaf.obs["inner.0"], plain.obs[:, 0].astype(np.int64) % 5)
    for name in ("action", "ret", "discount"):
        np.testing.assert_array_equal(getattr(by_leaf, name), getattr(plain, name))
    assert by_leaf.obs["inner.0"].dtype == np.int64
    empty = NStepBuilder(2, (), 3, 0.9, leaves=LEAVES).empty({"pos": np.zeros((2, 2))})
    assert len(empty) == 0


def test_the_ring_stores_samples_and_checkpoints_each_leaf() -> None:
    batch = steps(NStepBuilder(2, (), 3, 0.9, leaves=LEAVES), structured=True)
    memory = make_replay(8, (), np.float32, 0, False, 0.6, leaves=LEAVES)
    assert isinstance(memory, ReplayBuffer)
    memory.add(batch)  # more than it holds: the newest 8
    assert len(memory) == 8
    newest = batch.rows(slice(-8, None))
    np.testing.assert_array_equal(memory.obs["pos"], newest.obs["pos"])
    np.testing.assert_array_equal(memory.next_obs["inner.0"], newest.next_obs["inner.0"])
    assert memory.nbytes == 8 * (2 * (2 * 4 + 8) + 8 + 4 + 4)
    drawn = memory.sample(5, np.random.default_rng(0))
    assert drawn.obs["pos"].shape == (5, 2)
    assert drawn.obs["inner.0"].shape == (5,)

    back = ReplayBuffer(8, (), leaves=LEAVES)
    saved = checkpoint.decode(checkpoint.encode(memory.state_dict()))
    back.load_state_dict(saved)
    for name in ("obs", "next_obs"):
        for leaf in ("pos", "inner.0"):
            np.testing.assert_array_equal(getattr(back, name)[leaf], getattr(memory, name)[leaf])
    np.testing.assert_array_equal(back.action, memory.action)


def test_an_actors_outbox_carries_dict_chunks_unchanged() -> None:
    env_fn = env_factory("pararl/DictCue-v0", training=True, kwargs={"continuous": True})
    space = env_fn().observation_space
    specs = leaves(space)
    policy = UniformFirst(
        lambda: squashed_actor(0, 1, (8,), np.array([-1.0]), np.array([1.0]), specs), 1, 0
    )
    spec = ActorSpec(
        env_fn=env_fn,
        num_envs=2,
        obs_shape=(),
        obs_dtype=np.dtype(np.float32),
        policy=policy,
        n_step=2,
        gamma=0.9,
        chunk_steps=20,  # past a time limit of 16: episode ends flush
        sync_every=1,
        leaves=specs,
    )
    torch.manual_seed(0)
    actor = ChunkSampler(spec, seed=3, path=(0, 0, 0))
    try:
        batch, _, _ = actor.sample(lambda: 0)
    finally:
        actor.close()
    assert isinstance(batch, Transitions)
    assert batch.obs["image"].dtype == np.uint8
    shared = SharedArrays(outbox_specs(1, spec), mp.get_context())
    _write_slot(shared.arrays, 1, 0, batch)
    back = read_slot(shared.arrays, 1, 0, Chunk(0, len(batch), 40, 0, [], 0.0, 0))
    assert isinstance(back, Transitions)
    for name in ("obs", "next_obs"):
        assert sorted(getattr(back, name)) == ["count", "image", "vector"]
        for leaf, value in getattr(batch, name).items():
            np.testing.assert_array_equal(getattr(back, name)[leaf], value)
    np.testing.assert_array_equal(back.action, batch.action)
