"""The DQN update: TD targets bootstrap through truncation, not through termination."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pararl.algos.dqn import DQNLearner, initial_priorities
from pararl.config import DQNConfig
from pararl.models import QNetwork, num_params
from pararl.models.acting import Draws, starts
from pararl.replay.nstep import NStepBuilder, Transitions
from pararl.weights.shared import flat_to_params, params_to_flat


def constant_q(value: float) -> QNetwork:
    """A Q-network that outputs `value` for every action (zero weights, bias = value)."""
    q = QNetwork(2, 2, hidden=(4,))
    with torch.no_grad():
        for p in q.parameters():
            p.zero_()
        q.net[-1].bias.fill_(value)
    return q


def test_td_target_uses_discount_zero_after_termination() -> None:
    cfg = DQNConfig(lr=1e-9, gamma=0.9, double_dqn=False).for_env("discrete").config
    learner = DQNLearner(constant_q(5.0), cfg, torch.device("cpu"))
    obs = np.zeros((2, 2), np.float32)
    # transition 0: truncated after 1 step (discount gamma); 1: terminated (discount 0)
    batch = Transitions(obs, np.array([0, 1]), np.array([1.0, 1.0]), obs, np.array([0.9, 0.0]))
    _, td_error = learner.update(batch)
    target = td_error + 5.0  # the TD error is the target minus Q(s, a) = 5
    assert target.tolist() == pytest.approx([1.0 + 0.9 * 5.0, 1.0])


def test_importance_weights_scale_each_sample_loss() -> None:
    """Weights (prioritized replay) multiply each sample's Huber loss: weight 0 on a
    sample removes its gradient (Adam's first step is the gradient's sign, so the
    other sample's step alone is the same as a batch of that sample)."""
    cfg = (
        DQNConfig(lr=1e-2, gamma=0.9, double_dqn=False, max_grad_norm=1e9)
        .for_env("discrete")
        .config
    )
    obs = np.array([[1.0, -2.0], [-3.0, 0.5]], np.float32)
    batch = Transitions(obs, np.array([0, 1]), np.array([1.0, -4.0]), obs, np.zeros(2))

    def net() -> QNetwork:
        torch.manual_seed(0)
        return QNetwork(2, 2, hidden=(4,))

    grads = []
    for weights in (np.array([1.0, 0.0]), np.array([1.0, 1.0])):
        learner = DQNLearner(net(), cfg, torch.device("cpu"))
        before = params_of(learner.q)
        learner.update(batch, weights)
        grads.append(params_of(learner.q) - before)
    assert not np.allclose(grads[0], grads[1])
    only_first = DQNLearner(net(), cfg, torch.device("cpu"))
    before = params_of(only_first.q)
    only_first.update(batch.rows(slice(0, 1)))
    np.testing.assert_allclose(params_of(only_first.q) - before, grads[0], atol=1e-6)


def params_of(q: QNetwork) -> np.ndarray:
    flat = np.zeros(num_params(q), np.float32)
    params_to_flat(q, flat)
    return flat


def test_hard_target_update_period() -> None:
    cfg = DQNConfig(lr=1e-2, target_update=3).for_env("discrete").config
    learner = DQNLearner(QNetwork(2, 2, (8,)), cfg, torch.device("cpu"))
    rng = np.random.default_rng(0)
    batch = Transitions(
        rng.normal(size=(16, 2)).astype(np.float32),
        rng.integers(0, 2, 16),
        rng.normal(size=16),
        rng.normal(size=(16, 2)).astype(np.float32),
        np.full(16, 0.99),
    )

    def same() -> bool:
        return all(
            torch.equal(a, b)
            for a, b in zip(learner.q.parameters(), learner.q_target.parameters(), strict=True)
        )

    learner.update(batch)
    learner.update(batch)
    assert not same()
    learner.update(batch)
    assert same()


def test_flat_params_round_trip() -> None:
    a, b = QNetwork(3, 2, (5, 5)), QNetwork(3, 2, (5, 5))
    flat = np.zeros(num_params(a), np.float32)
    params_to_flat(a, flat)
    flat_to_params(flat, b)
    x = torch.randn(4, 3)
    assert torch.equal(a(x), b(x))


# States are one-hot rows of 8, so a net without hidden layers and bias is a table
# Q[s] (the columns of its weight). Online and target tables differ where it matters:
# at the states bootstrapped from (2, 6, 7) the online argmax is not the target's.
Q_ONLINE = {0: [0.5, 0, 0], 1: [0, 1.5, 0], 2: [1, 3, 2], 3: [0, 1, 0], 4: [0, 0, -2], 5: [1, 0, 0],
            6: [2, 0, 1], 7: [0, 0.5, 3]}  # fmt: skip
Q_TARGET = {2: [4, 0.5, 6], 3: [10, 20, 30], 6: [-1, 5, 2], 7: [2, 7, 1]}


def table_q(values: dict[int, list[float]]) -> QNetwork:
    q = QNetwork(8, 3, hidden=())
    with torch.no_grad():
        q.net[0].weight.zero_()
        q.net[0].bias.zero_()
        for state, row in values.items():
            q.net[0].weight[:, state] = torch.tensor(row)
    return q


def two_episodes() -> Transitions:
    """2-step transitions (gamma 0.9) of two envs stepping together, through pararl's
    n-step builder: env 0 goes 0 -> 1 -> 2 -> 3 and terminates, env 1 goes
    4 -> 5 -> 6 -> 7 and is truncated."""
    builder = NStepBuilder(2, (8,), n=2, gamma=0.9)
    one_hot = np.eye(8, dtype=np.float32)
    actions, rewards = [[0, 2], [1, 0], [2, 1]], [[1.0, -1.0], [2.0, 0.5], [3.0, 2.0]]
    parts = []
    for t in range(3):
        last = np.array([t == 2, t == 2])
        parts.append(
            builder.add(
                obs=one_hot[[t, 4 + t]],
                action=np.array(actions[t]),
                reward=np.array(rewards[t]),
                next_obs=one_hot[[t + 1, 5 + t]],
                terminated=last & [True, False],
                truncated=last & [False, True],
            )
        )
    return Transitions.concat(parts)


@pytest.mark.parametrize("double_dqn", [True, False])
def test_double_dqn_target_by_hand(double_dqn: bool) -> None:
    """target = R + gamma^k Q_target(s', argmax_a Q_online(s', a)), with R the k-step
    return and gamma^k 0 after termination (the vanilla target: max_a Q_target(s', a))."""
    cfg = DQNConfig(lr=1e-3, gamma=0.9, n_step=2, double_dqn=double_dqn).for_env("discrete")
    learner = DQNLearner(table_q(Q_ONLINE), cfg.config, torch.device("cpu"))
    learner.q_target.load_state_dict(table_q(Q_TARGET).state_dict())
    batch = two_episodes()
    states = batch.obs.argmax(axis=1).tolist()
    assert states == [0, 4, 1, 2, 5, 6]  # 2 steps full, then each episode's end flushed
    stats, td_error = learner.update(batch)

    # by state: (k-step return, discount, double value at s', max value at s')
    by_hand = {
        0: (1 + 0.9 * 2, 0.81, 0.5, 6),  # s' = 2: online picks 1, the target values it 0.5
        1: (2 + 0.9 * 3, 0.0, 20, 30),  # terminated at 3: no bootstrap
        2: (3.0, 0.0, 20, 30),
        4: (-1 + 0.9 * 0.5, 0.81, -1, 5),  # s' = 6: online picks 0
        5: (0.5 + 0.9 * 2, 0.81, 1, 7),  # truncated at 7: bootstrapped; online picks 2
        6: (2.0, 0.9, 1, 7),  # one step before the truncation
    }
    target = [r + g * (double if double_dqn else best) for r, g, double, best in
              (by_hand[s] for s in states)]  # fmt: skip
    taken = [Q_ONLINE[s][a] for s, a in zip(states, batch.action.tolist(), strict=True)]
    td = np.subtract(target, taken)
    assert (td_error.numpy() + taken).tolist() == pytest.approx(target, rel=1e-6)
    huber = np.where(np.abs(td) < 1, 0.5 * td**2, np.abs(td) - 0.5)
    assert float(stats["loss"]) == pytest.approx(huber.mean(), rel=1e-6)
    assert float(stats["q_mean"]) == pytest.approx(np.mean(taken), rel=1e-6)
    if double_dqn:  # the two targets differ on this batch: the test tells them apart
        vanilla = [r + g * best for r, g, _, best in (by_hand[s] for s in states)]
        assert not np.allclose(target, vanilla)


# Action masks of the next states (True: legal), chosen so that the masked targets
# differ from the unmasked ones at every bootstrapped state
NEXT_MASKS = {1: [1, 1, 1], 2: [1, 0, 1], 3: [0, 1, 1], 5: [1, 1, 1], 6: [0, 1, 1], 7: [1, 0, 1]}


def two_masked_episodes() -> Transitions:
    """`two_episodes` with each step's next action mask."""
    builder = NStepBuilder(2, (8,), n=2, gamma=0.9, mask_size=3)
    one_hot = np.eye(8, dtype=np.float32)
    actions, rewards = [[0, 2], [1, 0], [2, 1]], [[1.0, -1.0], [2.0, 0.5], [3.0, 2.0]]
    parts = []
    for t in range(3):
        last = np.array([t == 2, t == 2])
        parts.append(
            builder.add(
                obs=one_hot[[t, 4 + t]],
                action=np.array(actions[t]),
                reward=np.array(rewards[t]),
                next_obs=one_hot[[t + 1, 5 + t]],
                terminated=last & [True, False],
                truncated=last & [False, True],
                next_mask=np.array([NEXT_MASKS[t + 1], NEXT_MASKS[5 + t]], bool),
            )
        )
    return Transitions.concat(parts)


@pytest.mark.parametrize("double_dqn", [True, False])
def test_masked_target_by_hand(double_dqn: bool) -> None:
    """With the next state's action mask, the target takes the max (double DQN: the
    online argmax) over its legal actions only."""
    cfg = DQNConfig(lr=1e-3, gamma=0.9, n_step=2, double_dqn=double_dqn).for_env("discrete")
    learner = DQNLearner(table_q(Q_ONLINE), cfg.config, torch.device("cpu"))
    learner.q_target.load_state_dict(table_q(Q_TARGET).state_dict())
    batch = two_masked_episodes()
    states = batch.obs.argmax(axis=1).tolist()
    next_states = batch.next_obs.argmax(axis=1).tolist()
    assert batch.next_mask is not None  # each transition holds its next state's mask
    assert batch.next_mask.astype(int).tolist() == [NEXT_MASKS[s] for s in next_states]
    _, td_error = learner.update(batch)

    # by state: (k-step return, discount, double value at s', max value at s')
    by_hand = {
        0: (1 + 0.9 * 2, 0.81, 6, 6),  # s' = 2 allows 0, 2: online picks 2, valued 6
        1: (2 + 0.9 * 3, 0.0, 0, 0),  # terminated: no bootstrap
        2: (3.0, 0.0, 0, 0),
        4: (-1 + 0.9 * 0.5, 0.81, 2, 5),  # s' = 6 allows 1, 2: online picks 2
        5: (0.5 + 0.9 * 2, 0.81, 1, 2),  # s' = 7 allows 0, 2: online picks 2, max is 2
        6: (2.0, 0.9, 1, 2),
    }
    target = [r + g * (double if double_dqn else best) for r, g, double, best in
              (by_hand[s] for s in states)]  # fmt: skip
    taken = [Q_ONLINE[s][a] for s, a in zip(states, batch.action.tolist(), strict=True)]
    assert (td_error.numpy() + taken).tolist() == pytest.approx(target, rel=1e-6)
    # Ape-X's first priorities bootstrap within the mask too (the actor's Q copy)
    priorities = initial_priorities(
        table_q(Q_TARGET), batch.obs, batch.action, batch.ret, batch.next_obs,
        batch.discount, batch.next_mask,
    )  # fmt: skip
    q_taken = [Q_TARGET.get(s, [0, 0, 0])[a] for s, a in zip(states, batch.action, strict=True)]
    best = [by_hand[s][0] + by_hand[s][1] * by_hand[s][3] for s in states]
    assert priorities.tolist() == pytest.approx(np.abs(np.subtract(best, q_taken)), rel=1e-6)


def test_masked_epsilon_greedy_draws_legal_actions_only() -> None:
    """Greedy: the best legal action; epsilon's uniform action: uniform over the legal
    ones (each row's legal actions about equally often)."""
    q = table_q(Q_ONLINE)
    obs = np.eye(8, dtype=np.float32)[np.zeros(6_000, np.int64) + 2]  # Q(2) = (1, 3, 2)
    mask = np.zeros((6_000, 3), bool)
    mask[:3_000, [0, 2]] = True
    mask[3_000:, 1] = True
    greedy = q.act(obs, None, starts(6_000), "greedy", Draws(), mask).action
    assert (greedy[:3_000] == 2).all()
    assert (greedy[3_000:] == 1).all()
    rng = np.random.default_rng(0)
    sampled = q.act(obs, None, starts(6_000), "sampled", Draws(rng, epsilon=1.0), mask).action
    assert mask[np.arange(6_000), sampled].all()
    counts = np.bincount(sampled[:3_000], minlength=3)
    assert counts[1] == 0
    assert abs(counts[0] - counts[2]) < 300
