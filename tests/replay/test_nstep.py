"""n-step transitions and the replay ring: truncation bootstraps, termination does not."""

from __future__ import annotations

import numpy as np
import pytest

from pararl.replay.nstep import NStepBuilder, Transitions
from pararl.replay.uniform import ReplayBuffer

GAMMA = 0.9


def run_episode(builder: NStepBuilder, rewards: list[float], end: str) -> Transitions:
    """One env: obs = step index; the last step terminates or truncates."""
    parts = []
    for t, r in enumerate(rewards):
        last = t == len(rewards) - 1
        parts.append(
            builder.add(
                obs=np.array([[t]], np.float32),
                action=np.array([t % 2]),
                reward=np.array([r]),
                next_obs=np.array([[t + 1]], np.float32),
                terminated=np.array([last and end == "term"]),
                truncated=np.array([last and end == "trunc"]),
            )
        )
    return Transitions.concat(parts)


@pytest.mark.parametrize("end", ["term", "trunc"])
def test_one_step_discount_zero_only_on_termination(end: str) -> None:
    out = run_episode(NStepBuilder(1, (1,), n=1, gamma=GAMMA), [1.0, 2.0, 3.0], end)
    assert out.obs[:, 0].tolist() == [0, 1, 2]
    assert out.next_obs[:, 0].tolist() == [1, 2, 3]
    assert out.ret.tolist() == [1.0, 2.0, 3.0]
    last = 0.0 if end == "term" else GAMMA
    assert out.discount.tolist() == pytest.approx([GAMMA, GAMMA, last])


@pytest.mark.parametrize("end", ["term", "trunc"])
def test_n_step_returns_by_hand(end: str) -> None:
    rewards = [1.0, 2.0, 3.0, 4.0]
    out = run_episode(NStepBuilder(1, (1,), n=3, gamma=GAMMA), rewards, end)
    g = GAMMA
    order = np.argsort(out.obs[:, 0])
    assert out.obs[order, 0].tolist() == [0, 1, 2, 3]
    expected_ret = [1 + 2 * g + 3 * g**2, 2 + 3 * g + 4 * g**2, 3 + 4 * g, 4.0]
    assert out.ret[order] == pytest.approx(expected_ret)
    assert out.next_obs[order, 0].tolist() == [3, 4, 4, 4]
    boot = [g**3, 0.0, 0.0, 0.0] if end == "term" else [g**3, g**3, g**2, g]
    assert out.discount[order] == pytest.approx(boot)


def test_reset_step_after_an_episode_end_is_skipped() -> None:
    b = NStepBuilder(1, (1,), n=1, gamma=GAMMA)
    one = np.ones(1, bool)
    zero = np.zeros(1, bool)
    first = b.add(
        np.zeros((1, 1), np.float32),
        np.array([0]),
        np.array([1.0]),
        np.ones((1, 1), np.float32),
        one,
        zero,
    )
    # NEXT_STEP autoreset: this step only resets the env; it is no transition
    reset = b.add(
        np.ones((1, 1), np.float32),
        np.array([1]),
        np.array([0.0]),
        np.full((1, 1), 5, np.float32),
        zero,
        zero,
    )
    after = b.add(
        np.full((1, 1), 5, np.float32),
        np.array([1]),
        np.array([1.0]),
        np.full((1, 1), 6, np.float32),
        zero,
        zero,
    )
    assert len(first) == 1
    assert len(reset) == 0
    assert len(after) == 1
    assert after.obs[0, 0] == 5


def test_envs_are_independent() -> None:
    b = NStepBuilder(2, (1,), n=2, gamma=GAMMA)
    outs = []
    for t in range(3):
        outs.append(
            b.add(
                np.array([[t], [10 + t]], np.float32),
                np.array([0, 1]),
                np.array([1.0, 10.0]),
                np.array([[t + 1], [11 + t]], np.float32),
                np.array([False, t == 0]),
                np.zeros(2, bool),
            )
        )
    allt = Transitions.concat(outs)
    env1 = allt.obs[:, 0] >= 10
    # env 1 terminated at t=0, reset at t=1 (skipped), real step at t=2 (not complete yet)
    assert allt.obs[env1, 0].tolist() == [10]
    assert allt.discount[env1].tolist() == [0.0]
    assert allt.obs[~env1, 0].tolist() == [0, 1]


def test_replay_ring_overwrites_oldest_and_samples_stored() -> None:
    rb = ReplayBuffer(4, (1,))
    for start in range(0, 6, 2):
        obs = np.array([[start], [start + 1]], np.float32)
        rb.add(Transitions(obs, np.zeros(2, np.int64), np.zeros(2), obs, np.ones(2)))
    assert len(rb) == 4
    assert rb.added == 6
    assert sorted(rb.obs[:, 0].tolist()) == [2, 3, 4, 5]
    sample = rb.sample(64, np.random.default_rng(0))
    assert set(sample.obs[:, 0].tolist()) <= {2, 3, 4, 5}


def test_replay_state_round_trip() -> None:
    rb = ReplayBuffer(8, (2,))
    obs = np.arange(10, dtype=np.float32).reshape(5, 2)
    rb.add(Transitions(obs, np.arange(5), np.arange(5.0), obs + 1, np.full(5, 0.5)))
    other = ReplayBuffer(8, (2,))
    other.load_state_dict(rb.state_dict())
    assert len(other) == 5
    assert other.pos == rb.pos
    assert other.added == 5
    np.testing.assert_array_equal(other.obs[:5], rb.obs[:5])
    np.testing.assert_array_equal(other.discount[:5], rb.discount[:5])


def test_learning_starts_counts_transitions_added_to_a_frame_memory() -> None:
    """rl-zoo's Atari setting (memory size = learning_starts): the frame memory never
    holds that many transitions, episode ends taking slots, yet learning starts."""
    import gymnasium as gym
    import torch

    from pararl.algos.dqn import DQNState
    from pararl.config import DQNConfig
    from pararl.replay.frame_memory import FrameReplay
    from tests.replay.test_frame_memory import FRAME, fill

    space = gym.spaces.Box(0, 255, (3, *FRAME), np.uint8)
    cfg = DQNConfig(env="x", buffer_size=60, learning_starts=60, batch_size=8, model="mlp")
    actions = gym.spaces.Discrete(4)
    state = DQNState(
        cfg.for_spaces(space, actions), space, actions, torch.device("cpu"), frame_stack=3
    )
    assert isinstance(state.replay, FrameReplay)
    fill(state.replay, 1, 2, 3, 1, 20, 4, seed=0)  # 40 transitions
    assert not state.can_learn()
    fill(state.replay, 1, 2, 3, 1, 30, 4, seed=1)  # 60 more: the ring has wrapped
    assert len(state.replay) < 60 <= state.replay.added
    assert state.can_learn()
