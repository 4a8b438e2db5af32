"""V-trace by hand (a termination, a truncation, ratios clipped and not), against the
paper's sum form of `vs` on random rollouts, on-policy against GAE(lambda=1), and the
same numbers from numpy and torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pararl.gae import gae
from pararl.vtrace import vtrace

G = 0.9


def test_vtrace_by_hand() -> None:
    # env 0: ep A = steps 0,1 (terminated at 1); ep B = steps 2,3, still running
    # (V(obs_4) = 2.0). env 1: ep C = steps 0-2 (truncated at 2, last observation
    # worth 5.0); ep D = step 3 (terminated)
    r = np.array([[1.0, 0.0], [2.0, 1.0], [3.0, -1.0], [4.0, 2.0]])
    v = np.array([[0.5, 1.0], [0.6, 1.5], [0.7, 2.0], [0.8, -1.0]])
    next_v = np.array([[0.6, 1.5], [0.0, 2.0], [0.8, 5.0], [2.0, 0.0]])
    ends = np.array([[False, False], [True, False], [False, True], [False, True]])
    ratios = np.array([[0.5, 1.5], [2.0, 0.5], [1.0, 0.95], [0.95, 3.0]])
    # rho_bar = 1, c_bar = 0.9: rho = min(1, ratio), c = min(0.9, ratio)
    vs, adv = vtrace(np.log(ratios), r, v, next_v, ends, G, rho_bar=1.0, c_bar=0.9)

    # env 0: rho = 0.5, 1, 1, 0.95; c = 0.5, 0.9, 0.9, 0.9
    vs3 = 0.8 + 0.95 * (4.0 + G * 2.0 - 0.8)  # bootstraps from V(obs_4)
    vs2 = 0.7 + 1.0 * (3.0 + G * 0.8 - 0.7) + G * 0.9 * (vs3 - 0.8)
    vs1 = 0.6 + 1.0 * (2.0 + 0.0 - 0.6)  # terminated: nothing carried back
    vs0 = 0.5 + 0.5 * (1.0 + G * 0.6 - 0.5) + G * 0.5 * (vs1 - 0.6)
    assert vs[:, 0] == pytest.approx([vs0, vs1, vs2, vs3])
    adv0 = [
        0.5 * (1.0 + G * vs1 - 0.5),
        1.0 * (2.0 + G * 0.0 - 0.6),  # the episode ended: its own bootstrap (0)
        1.0 * (3.0 + G * vs3 - 0.7),
        0.95 * (4.0 + G * 2.0 - 0.8),  # the last step: vs_T = V(obs_T)
    ]
    assert adv[:, 0] == pytest.approx(adv0)

    # env 1: rho = 1, 0.5, 0.95, 1; c = 0.9, 0.5, 0.9, 0.9
    ws3 = -1.0 + 1.0 * (2.0 + 0.0 + 1.0)  # terminated
    ws2 = 2.0 + 0.95 * (-1.0 + G * 5.0 - 2.0)  # truncated: from the last observation
    ws1 = 1.5 + 0.5 * (1.0 + G * 2.0 - 1.5) + G * 0.5 * (ws2 - 2.0)
    ws0 = 1.0 + 1.0 * (0.0 + G * 1.5 - 1.0) + G * 0.9 * (ws1 - 1.5)
    assert vs[:, 1] == pytest.approx([ws0, ws1, ws2, ws3])
    adv1 = [
        1.0 * (0.0 + G * ws1 - 1.0),
        0.5 * (1.0 + G * ws2 - 1.5),
        0.95 * (-1.0 + G * 5.0 - 2.0),
        1.0 * (2.0 + G * 0.0 + 1.0),
    ]
    assert adv[:, 1] == pytest.approx(adv1)
    # the same, worked out on paper
    assert vs == pytest.approx(
        np.array([[1.65, 2.3959125], [2.0, 2.79125], [7.5675, 3.425], [5.55, 2.0]])
    )
    assert adv == pytest.approx(
        np.array([[1.15, 1.512125], [1.4, 1.29125], [7.295, 1.425], [4.75, 3.0]])
    )


def _rollout(
    rng: np.random.Generator, steps: int, n: int, end_prob: float = 0.2
) -> tuple[np.ndarray, ...]:
    """Random rewards, values, episode ends and the values each step bootstraps from:
    the next step's value while an episode goes on, 0 or a last observation's value
    where it ended, V(obs_T) after the last step."""
    r = rng.standard_normal((steps, n))
    v = rng.standard_normal((steps, n))
    terminated = rng.random((steps, n)) < end_prob
    truncated = ~terminated & (rng.random((steps, n)) < end_prob)
    following = np.concatenate([v[1:], rng.standard_normal((1, n))])
    next_v = np.where(
        terminated, 0.0, np.where(truncated, rng.standard_normal((steps, n)), following)
    )
    return r, v, next_v, terminated | truncated


def _vs_as_a_sum(
    rhos: np.ndarray,
    cs: np.ndarray,
    r: np.ndarray,
    v: np.ndarray,
    next_v: np.ndarray,
    ends: np.ndarray,
) -> np.ndarray:
    """The paper's definition (its eq. 1): vs_s = V_s + sum_{t >= s} gamma^(t-s)
    (c_s ... c_{t-1}) delta_t, the sum stopping where the episode ends."""
    deltas = rhos * (r + G * next_v - v)
    vs = v.copy()
    for s in range(len(r)):
        weight = np.ones(r.shape[1])
        going = np.ones(r.shape[1], bool)  # no episode end in s..t-1
        for t in range(s, len(r)):
            vs[s] += np.where(going, weight * deltas[t], 0.0)
            weight = weight * G * cs[t]
            going &= ~ends[t]
    return vs


@pytest.mark.parametrize(("rho_bar", "c_bar"), [(1.0, 1.0), (1.0, 0.7), (2.0, 1.0)])
def test_vs_is_the_papers_sum(rho_bar: float, c_bar: float) -> None:
    rng = np.random.default_rng(0)
    r, v, next_v, ends = _rollout(rng, 12, 5)
    log_rhos = rng.normal(0.0, 0.7, r.shape)
    vs, adv = vtrace(log_rhos, r, v, next_v, ends, G, rho_bar, c_bar)
    ratios = np.exp(log_rhos)
    rhos, cs = np.minimum(ratios, rho_bar), np.minimum(ratios, c_bar)
    assert (ratios > rho_bar).any()  # steps clipped ...
    assert (ratios < c_bar).any()  # ... and steps not
    np.testing.assert_allclose(vs, _vs_as_a_sum(rhos, cs, r, v, next_v, ends))
    vs_next = np.where(ends, next_v, np.concatenate([vs[1:], next_v[-1:]]))
    np.testing.assert_allclose(adv, rhos * (r + G * vs_next - v))


@pytest.mark.parametrize("seed", range(3))
def test_on_policy_is_gae_lambda_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    r, v, next_v, ends = _rollout(rng, 16, 4, end_prob=0.15)
    ends[-1, 0] = True  # an episode ending at the last step, too
    vs, adv = vtrace(np.zeros_like(r), r, v, next_v, ends, G)
    gae_adv = gae(r, v, next_v, ends, G, 1.0)
    np.testing.assert_allclose(vs, gae_adv + v)
    np.testing.assert_allclose(adv, gae_adv)


def test_numpy_and_torch_agree() -> None:
    rng = np.random.default_rng(1)
    r, v, next_v, ends = _rollout(rng, 9, 3)
    log_rhos = rng.normal(0.0, 0.5, r.shape)
    out = vtrace(log_rhos, r, v, next_v, ends, G, 1.0, 0.9)
    tensors = (torch.as_tensor(a) for a in (log_rhos, r, v, next_v, ends))
    out_t = vtrace(*tensors, G, 1.0, 0.9)
    for a, b in zip(out, out_t, strict=True):
        assert isinstance(b, torch.Tensor)
        np.testing.assert_allclose(b.numpy(), a)


def test_one_step() -> None:
    vs, adv = vtrace(
        np.array([np.log(3.0)]), np.array([1.0]), np.array([0.5]), np.array([2.0]),
        np.array([False]), G, rho_bar=1.0,
    )  # fmt: skip
    assert vs == pytest.approx([0.5 + 1.0 + G * 2.0 - 0.5])
    assert adv == pytest.approx([1.0 + G * 2.0 - 0.5])
