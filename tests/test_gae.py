"""GAE by hand: a terminated episode, a truncated one (bootstrapped from the value of
its last observation), and a rollout cut mid-episode (bootstrapped from V(obs_T))."""

from __future__ import annotations

import numpy as np
import pytest

from pararl.samplers.rollout.collect import advantages_and_returns

G, L = 0.9, 0.8


def test_gae_by_hand() -> None:
    # one env, 4 steps: ep A = steps 0,1 (terminated at 1); ep B = step 2 (truncated,
    # last observation worth 5.0); ep C = step 3, still running (V(obs_4) = 2.0)
    r = np.array([[1.0], [2.0], [3.0], [4.0]])
    v = np.array([[0.5], [0.6], [0.7], [0.8]])
    term = np.array([[False], [True], [False], [False]])
    trunc = np.array([[False], [False], [True], [False]])
    final = np.array([[0.0], [0.0], [5.0], [0.0]])
    adv, ret = advantages_and_returns(r, v, np.array([2.0]), term, trunc, final, G, L)

    d3 = 4.0 + G * 2.0 - 0.8
    d2 = 3.0 + G * 5.0 - 0.7  # bootstrapped through truncation
    d1 = 2.0 + 0.0 - 0.6  # terminated: no bootstrap
    d0 = 1.0 + G * 0.6 - 0.5
    expected = [d0 + G * L * d1, d1, d2, d3]
    assert adv[:, 0] == pytest.approx(expected)
    assert ret[:, 0] == pytest.approx(np.array(expected) + v[:, 0])


def test_gae_lambda_one_is_discounted_return_minus_value() -> None:
    r = np.ones((3, 2))
    v = np.zeros((3, 2))
    no = np.zeros((3, 2), bool)
    adv, _ = advantages_and_returns(r, v, np.zeros(2), no, no, np.zeros((3, 2)), G, 1.0)
    assert adv[0] == pytest.approx([1 + G + G**2] * 2)
