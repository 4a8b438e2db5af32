"""Dict and Tuple observations in the off-policy path, held leaf by leaf: n-step
transitions of each leaf are those of the leaf alone, the replay ring stores, samples
and checkpoints each leaf, and an actor's shared-memory outbox carries them unchanged;
with an env's action masks, each transition's next mask travels beside the leaves, and
the networks that read the leaves act within the masks."""

from __future__ import annotations

import multiprocessing as mp

import gymnasium as gym
import numpy as np
import torch

from pararl import checkpoint
from pararl.algos.dqn import EpsilonGreedy, EpsilonSchedule
from pararl.algos.offpolicy import UniformFirst
from pararl.envs.make import env_factory
from pararl.models import squashed_actor
from pararl.models.acting import Draws
from pararl.models.build import actor_critic, q_network
from pararl.mp.shared import SharedArrays
from pararl.observations import flat, leaves
from pararl.replay.make import make_replay
from pararl.replay.nstep import NStepBuilder, Transitions
from pararl.replay.uniform import ReplayBuffer
from pararl.samplers.chunks.actor import outbox_specs, read_slot, write_slot
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
    write_slot(shared.arrays, 1, 0, batch)
    back = read_slot(shared.arrays, 1, 0, Chunk(0, len(batch), 40, 0, [], 0.0, 0))
    assert isinstance(back, Transitions)
    for name in ("obs", "next_obs"):
        assert sorted(getattr(back, name)) == ["count", "image", "vector"]
        for leaf, value in getattr(batch, name).items():
            np.testing.assert_array_equal(getattr(back, name)[leaf], value)
    np.testing.assert_array_equal(back.action, batch.action)


def masked_steps(builder: NStepBuilder, structured: bool) -> Transitions:
    """`steps` with each step's next action mask (3 actions): row k of the mask is
    the bits of k + env, so each transition's tells which next observation it is."""
    parts = []
    for t in range(12):

        def obs(k: int) -> object:
            pos = np.full((2, 2), k, np.float32)
            return {"pos": pos, "inner": (np.full(2, k % 5, np.int64),)} if structured else pos

        term = np.array([t % 4 == 3, False])
        trunc = np.array([False, t % 5 == 4])
        reward = np.array([t, 10.0 * t])
        bits = (t + 1 + np.arange(2))[:, None] >> np.arange(3) & 1
        next_mask = bits.astype(bool) | np.array([True, False, False])  # never all False
        step = (obs(t), np.array([t % 2, 1]), reward, obs(t + 1), term, trunc, next_mask)
        parts.append(builder.add(*step))
    return Transitions.concat(parts)


def test_leaves_and_masks_travel_together_through_n_steps_the_ring_and_replay_pt() -> None:
    """Dict observations with action masks: each leaf's transitions are the plain
    ones', each keeps its next mask; the ring stores, samples and checkpoints both;
    without masks a leaf builder's transitions carry none."""
    plain = masked_steps(NStepBuilder(2, (2,), 3, 0.9, mask_size=3), structured=False)
    both = masked_steps(NStepBuilder(2, (), 3, 0.9, mask_size=3, leaves=LEAVES), structured=True)
    assert plain.next_mask is not None
    assert both.next_mask is not None
    np.testing.assert_array_equal(both.next_mask, plain.next_mask)
    np.testing.assert_array_equal(both.obs["pos"], plain.obs)
    np.testing.assert_array_equal(both.next_obs["pos"], plain.next_obs)
    np.testing.assert_array_equal(both.action, plain.action)
    unmasked = steps(NStepBuilder(2, (), 3, 0.9, leaves=LEAVES), structured=True)
    assert unmasked.next_mask is None
    empty = NStepBuilder(2, (), 3, 0.9, mask_size=3, leaves=LEAVES).empty({"pos": np.zeros((2, 2))})
    assert empty.next_mask is not None
    assert empty.next_mask.shape == (0, 3)

    memory = make_replay(8, (), np.float32, 0, False, 0.6, mask_size=3, leaves=LEAVES)
    assert isinstance(memory, ReplayBuffer)
    memory.add(both)
    newest = both.rows(slice(-8, None))
    assert newest.next_mask is not None
    assert memory.nbytes == 8 * (2 * (2 * 4 + 8) + 8 + 4 + 4 + 3)
    drawn = memory.gather(np.arange(8))
    assert drawn.next_mask is not None
    np.testing.assert_array_equal(drawn.next_mask, newest.next_mask)
    np.testing.assert_array_equal(drawn.obs["inner.0"], newest.obs["inner.0"])

    back = ReplayBuffer(8, (), mask_size=3, leaves=LEAVES)
    back.load_state_dict(checkpoint.decode(checkpoint.encode(memory.state_dict())))
    assert back.next_mask is not None
    assert memory.next_mask is not None
    np.testing.assert_array_equal(back.next_mask, memory.next_mask)
    np.testing.assert_array_equal(back.next_obs["pos"], memory.next_obs["pos"])


def test_an_outbox_carries_leaves_and_next_masks_side_by_side() -> None:
    specs = leaves(SPACE)
    batch = masked_steps(NStepBuilder(2, (), 3, 0.9, mask_size=3, leaves=specs), structured=True)
    spec = ActorSpec(
        env_fn=env_factory("CartPole-v1"),  # not built here: the outbox's layout only
        num_envs=2,
        obs_shape=(),
        obs_dtype=np.dtype(np.float32),
        policy=EpsilonGreedy(
            lambda: q_network("multi-input", (), np.float32, 3, (8,), leaves=specs),
            EpsilonSchedule(1.0, 0.1, 10),
        ),
        n_step=3,
        gamma=0.9,
        chunk_steps=12,
        sync_every=1,
        mask_size=3,
        leaves=specs,
    )
    layout = outbox_specs(0, spec)
    assert {"a0.obs.pos", "a0.next_obs.inner.0", "a0.next_mask"} <= set(layout)
    shared = SharedArrays(layout, mp.get_context())
    write_slot(shared.arrays, 0, 1, batch)
    back = read_slot(shared.arrays, 0, 1, Chunk(1, len(batch), 24, 0, [], 0.0, 0))
    assert isinstance(back, Transitions)
    assert back.next_mask is not None
    assert batch.next_mask is not None
    np.testing.assert_array_equal(back.next_mask, batch.next_mask)
    for name in ("obs", "next_obs"):
        assert sorted(getattr(back, name)) == ["inner.0", "pos"]
        for leaf, value in getattr(batch, name).items():
            np.testing.assert_array_equal(getattr(back, name)[leaf], value)


def test_networks_keep_to_masks_on_dict_observations() -> None:
    """A Q-network and an actor-critic on Dict observations: greedy and sampled
    actions are legal ones, and the masked log-probabilities sum to one over them."""
    torch.manual_seed(0)
    specs = leaves(SPACE)
    batched = gym.vector.utils.batch_space(SPACE, 64)
    batched.seed(0)
    obs = batched.sample()
    rng = np.random.default_rng(0)
    mask = rng.random((64, 3)) < 0.5
    mask[np.arange(64), rng.integers(0, 3, 64)] = True
    q = q_network("multi-input", (), np.float32, 3, (16,), leaves=specs)
    ac = actor_critic("multi-input", (), np.float32, 3, True, (16,), leaves=specs)
    draws = Draws(rng, torch.Generator().manual_seed(0), epsilon=1.0)
    for policy in (q, ac):
        for mode in ("greedy", "sampled"):
            acted = policy.act(obs, None, np.ones(64, bool), mode, draws, mask)
            assert mask[np.arange(64), acted.action].all(), (type(policy).__name__, mode)
    tensors = {k: torch.as_tensor(v) for k, v in flat(obs).items()}
    every = torch.arange(3).repeat(64, 1).T  # each action, for every row
    logps = torch.stack(
        [ac.evaluate(tensors, a, torch.as_tensor(mask))[0] for a in every]
    ).T.detach()
    legal = torch.as_tensor(mask)
    torch.testing.assert_close(logps.exp().where(legal, 0).sum(1), torch.ones(64))
    assert (logps.exp().where(~legal, 0) < 1e-6).all()
