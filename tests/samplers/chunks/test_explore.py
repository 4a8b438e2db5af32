"""SAC's acting policy: uniform actions within the bounds for the run's first steps,
whatever the network; then samples of the squashed Gaussian from the actor's own
stream; through the chunk sampler, continuous transitions come out."""

from __future__ import annotations

import functools

import numpy as np
import torch

from pararl.algos.offpolicy import UniformFirst
from pararl.envs.make import env_factory
from pararl.models import squashed_actor
from pararl.replay.nstep import Transitions
from pararl.samplers.chunks.sampler import ActorSpec, ChunkSampler

LOW, HIGH = np.array([-2.0], np.float32), np.array([2.0], np.float32)
MAKE = functools.partial(squashed_actor, 3, 1, (8,), LOW, HIGH)
FIRST = np.ones(500, bool)


def test_random_first_then_the_actors_samples() -> None:
    policy = UniformFirst(MAKE, 1, random_steps=100)
    torch.manual_seed(0)
    a, b = policy.make_net(), policy.make_net()  # two different networks
    obs = np.random.default_rng(0).standard_normal((500, 3)).astype(np.float32)
    first = policy.act(a, obs, None, FIRST, 99, np.random.default_rng(1)).action
    np.testing.assert_array_equal(
        first, policy.act(b, obs, None, FIRST, 99, np.random.default_rng(1)).action
    )
    assert (first >= LOW).all()
    assert (first <= HIGH).all()
    assert first.std() > 1.0  # uniform on [-2, 2]: std 1.15
    later = policy.act(a, obs, None, FIRST, 100, np.random.default_rng(1)).action
    noise = np.random.default_rng(1).standard_normal((500, 1), dtype=np.float32)
    np.testing.assert_array_equal(later, a.with_noise(obs, noise))  # the actor's own sample
    assert not np.array_equal(
        later, policy.act(b, obs, None, FIRST, 100, np.random.default_rng(1)).action
    )


def test_chunks_of_continuous_transitions() -> None:
    policy = UniformFirst(MAKE, 1, random_steps=0)
    spec = ActorSpec(
        env_fn=env_factory("Pendulum-v1", training=True),
        num_envs=2,
        obs_shape=(3,),
        obs_dtype=np.dtype(np.float32),
        policy=policy,
        n_step=1,
        gamma=0.99,
        chunk_steps=8,
        sync_every=4,
    )
    sampler = ChunkSampler(spec, seed=0, path=(0, 0, 0))
    try:
        batch, _, _ = sampler.sample(lambda: 0)
    finally:
        sampler.close()
    assert isinstance(batch, Transitions)
    assert batch.action.shape == (16, 1)
    assert batch.action.dtype == np.float32
    assert not spec.priorities
