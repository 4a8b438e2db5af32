"""Prioritized replay: the sum tree's sums and proportional draws, importance
weights, priorities from TD errors, both memory kinds, checkpoints, and Ape-X's
per-actor epsilons."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pararl.algos.dqn import EpsilonSchedule
from pararl.replay.frame_memory import FrameReplay
from pararl.replay.nstep import Transitions
from pararl.replay.prioritized import PRIORITY_EPS, PrioritizedReplay, importance_weights
from pararl.replay.sumtree import SumTree
from pararl.replay.uniform import ReplayBuffer
from tests.replay.test_frame_memory import FRAME, fill


def check_sums(tree: SumTree) -> None:
    for parent, child in zip(tree.layers[:-1], tree.layers[1:], strict=True):
        np.testing.assert_allclose(parent, child[0::2] + child[1::2])


@settings(max_examples=40, deadline=None)
@given(
    capacity=st.integers(1, 70),
    updates=st.lists(
        st.tuples(st.integers(0, 69), st.floats(0, 100, allow_nan=False)), max_size=60
    ),
)
def test_sum_tree_updates_keep_every_node_the_sum_of_its_children(
    capacity: int, updates: list[tuple[int, float]]
) -> None:
    tree, expected = SumTree(capacity), np.zeros(capacity)
    for start in range(0, len(updates), 7):  # batches, repeated indices included
        part = [(i % capacity, p) for i, p in updates[start : start + 7]]
        index = np.array([i for i, _ in part], dtype=np.int64)
        tree.set(index, np.array([p for _, p in part]))
        for i, p in part:
            expected[i] = p
    np.testing.assert_allclose(tree.leaves[:capacity], expected)
    check_sums(tree)
    assert tree.total == pytest.approx(expected.sum())


def test_sum_tree_samples_in_proportion_to_priority() -> None:
    """Chi-square against P(i) = p_i / sum p, fixed seed; priority 0 is never drawn."""
    priorities = np.array([1.0, 0.0, 2.0, 3.0, 0.5, 0.0, 4.0, 1.5, 8.0, 0.25])
    tree = SumTree(len(priorities))
    tree.set(np.arange(len(priorities)), priorities)
    rng = np.random.default_rng(0)
    draws = np.concatenate([tree.sample(32, rng) for _ in range(2_000)])
    counts = np.bincount(draws, minlength=len(priorities))
    assert counts[priorities == 0].sum() == 0
    live = priorities > 0
    expected = len(draws) * priorities[live] / priorities.sum()
    chi2 = ((counts[live] - expected) ** 2 / expected).sum()
    assert chi2 < 26.1  # chi-square, 7 degrees of freedom, p = 0.0005


def test_sum_tree_find_at_the_boundaries() -> None:
    tree = SumTree(4)
    tree.set(np.arange(4), np.array([1.0, 0.0, 2.0, 0.0]))
    assert tree.find(np.array([0.0, 0.999, 1.0, 2.999])).tolist() == [0, 0, 2, 2]


def transitions(n: int, start: int = 0) -> Transitions:
    obs = np.arange(start, start + n, dtype=np.float32)[:, None]
    return Transitions(obs, np.zeros(n, np.int64), np.zeros(n), obs + 1, np.ones(n))


def test_importance_weights_as_defined() -> None:
    probs = np.array([0.1, 0.2, 0.4])
    w = importance_weights(probs, count=10, beta=0.5)
    raw = (10 * probs) ** -0.5
    np.testing.assert_allclose(w, raw / raw.max(), rtol=1e-6)
    assert w.max() == pytest.approx(1.0)


def test_priorities_follow_td_errors_and_weights_use_them() -> None:
    replay = PrioritizedReplay(ReplayBuffer(8, (1,)), alpha=0.5)
    replay.add(transitions(4))
    assert replay.tree.leaves[:4].tolist() == [1.0] * 4  # new: the largest priority seen
    replay.update_priorities(np.arange(4), np.array([0.0, 1.0, -3.0, 8.0]))
    expected = (np.array([0.0, 1.0, 3.0, 8.0]) + PRIORITY_EPS) ** 0.5
    np.testing.assert_allclose(replay.tree.leaves[:4], expected)
    replay.add(transitions(1, 4))
    assert replay.tree.leaves[4] == pytest.approx(expected.max())  # max so far
    sample = replay.sample_prioritized(16, np.random.default_rng(0), beta=0.7)
    probs = replay.tree.get(sample.slots) / replay.tree.total
    np.testing.assert_allclose(sample.weights, importance_weights(probs, 5, 0.7), rtol=1e-6)
    np.testing.assert_array_equal(sample.batch.obs[:, 0], sample.slots)


def test_actor_priorities_are_used_for_new_transitions() -> None:
    replay = PrioritizedReplay(ReplayBuffer(8, (1,)), alpha=1.0)
    batch = transitions(3)
    batch.priority = np.array([0.5, 2.0, 0.0], np.float32)
    replay.add(batch)
    np.testing.assert_allclose(replay.tree.leaves[:3], [0.5, 2.0, 0.0], atol=1e-5)


def test_prioritized_frames_never_draw_overwritten_history() -> None:
    replay = PrioritizedReplay(FrameReplay(30, (4, *FRAME)), alpha=0.6)
    fill(replay, actors=2, envs=2, stack=4, n=3, steps=40, chunk=3, seed=5)
    rng = np.random.default_rng(1)
    for _ in range(20):
        sample = replay.sample_prioritized(32, rng, beta=0.4)
        assert replay.memory.valid(sample.slots).all()
        replay.update_priorities(sample.slots, rng.normal(size=32))
    leaves = replay.tree.leaves[: replay.capacity]
    assert (leaves[~replay.memory.has] == 0).all()  # no transition there, no priority


def test_prioritized_checkpoint_round_trip() -> None:
    replay = PrioritizedReplay(ReplayBuffer(8, (1,)), alpha=0.6)
    replay.add(transitions(6))
    replay.update_priorities(np.arange(6), np.arange(6.0))
    other = PrioritizedReplay(ReplayBuffer(8, (1,)), alpha=0.6)
    other.load_state_dict(replay.state_dict())
    np.testing.assert_array_equal(other.tree.leaves, replay.tree.leaves)
    check_sums(other.tree)
    assert other.max_priority == replay.max_priority
    a = replay.sample_prioritized(8, np.random.default_rng(3), 0.5)
    b = other.sample_prioritized(8, np.random.default_rng(3), 0.5)
    np.testing.assert_array_equal(a.slots, b.slots)


def test_apex_per_actor_epsilons() -> None:
    base = EpsilonSchedule(1.0, 0.05, 1000)
    eps = [base.for_actor(i, 8)(0) for i in range(8)]
    np.testing.assert_allclose(eps, [0.4 ** (1 + 7 * i / 7) for i in range(8)])
    assert eps[0] == pytest.approx(0.4)
    assert eps[-1] == pytest.approx(0.4**8)
    assert base.for_actor(0, 1)(500) == pytest.approx(0.4)
