"""`PPOLearner.vtrace` relabelling a flattened rollout (row t*B + b): on-policy it gives
the rollout's GAE(lambda=1) advantages and returns from the current values (Box and
Dict observations, evaluated in one pass or in chunks); the current policy is
evaluated within the rollout's action masks; off-policy it is `pararl.vtrace` of the
current model's log-probabilities and values; the relabelled batch then updates."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl.algos import ppo
from pararl.algos.ppo import PPOHyper, PPOLearner
from pararl.models import ActorCritic
from pararl.models.build import actor_critic
from pararl.models.heads import head_for
from pararl.observations import leaves, map_leaves
from pararl.samplers.rollout.collect import advantages_and_returns
from pararl.vtrace import vtrace

CPU = torch.device("cpu")
T, B, G = 6, 3, 0.9
DICT = gym.spaces.Dict(
    {"pos": gym.spaces.Box(-1, 1, (3,), np.float32), "mode": gym.spaces.Discrete(3)}
)


def _learner(obs: str, head: Any = None, actions: int = 2) -> PPOLearner:
    torch.manual_seed(0)
    if obs == "dict":
        specs = leaves(DICT)
        net = actor_critic("multi-input", (), np.float32, actions, True, (8,), leaves=specs)  # type: ignore[arg-type]
    else:
        net = actor_critic("mlp", (4,), np.float32, actions, True, (16, 16), head=head)
    return PPOLearner(net, PPOHyper(num_minibatches=2, update_epochs=1), 1e-3, CPU)


def _obs(obs: str, n: int, rng: np.random.Generator) -> Any:
    if obs == "dict":
        return {
            "pos": rng.standard_normal((n, 3)).astype(np.float32),
            "mode": rng.integers(0, 3, n),
        }
    return rng.standard_normal((n, 4)).astype(np.float32)


def _rollout(
    model: ActorCritic, obs: str, rng: np.random.Generator, masks: np.ndarray | None = None
) -> dict[str, Any]:
    """A flattened rollout acted by `model` (within `masks`): its actions and their
    log-probabilities, random rewards; env 0 terminates at step 1, env 1 is truncated
    at step 3 (its last observation worth 2.5), env 2 runs on."""
    batch: dict[str, Any] = {"obs": _obs(obs, T * B, rng), "last_obs": _obs(obs, B, rng)}
    tensors = map_leaves(torch.as_tensor, batch["obs"])
    mask = None if masks is None else torch.as_tensor(masks)
    with torch.no_grad():
        actions, logprobs, values = model.act_tensors(tensors, mask=mask)
    terminated, truncated = np.zeros((T, B), bool), np.zeros((T, B), bool)
    terminated[1, 0], truncated[3, 1] = True, True
    final_values = np.zeros((T, B), np.float32)
    final_values[3, 1] = 2.5
    batch |= {
        "actions": actions.numpy(),
        "logprobs": logprobs.numpy(),
        "values": values.numpy() + 1.0,  # the behaviour's: to be replaced
        "advantages": np.zeros(T * B, np.float32),
        "returns": np.zeros(T * B, np.float32),
        "rewards": rng.standard_normal(T * B).astype(np.float32),
        "terminated": terminated.reshape(-1),
        "truncated": truncated.reshape(-1),
        "final_values": final_values.reshape(-1),
    }
    if masks is not None:
        batch["masks"] = masks
    return batch


def _current_values(model: ActorCritic, batch: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The model's values of the rollout's observations [T, B] and of the last ones."""
    with torch.no_grad():
        values = model.value(map_leaves(torch.as_tensor, batch["obs"])).numpy()
        last = model.value(map_leaves(torch.as_tensor, batch["last_obs"])).numpy()
    return values.reshape(T, B), last


def _gae_one(model: ActorCritic, batch: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """GAE(lambda=1) advantages and returns of the rollout under the model's values,
    as the sampler computes them."""
    values, last = _current_values(model, batch)
    adv, ret = advantages_and_returns(
        batch["rewards"].reshape(T, B).astype(np.float64),
        values.astype(np.float64),
        last,
        batch["terminated"].reshape(T, B),
        batch["truncated"].reshape(T, B),
        batch["final_values"].reshape(T, B),
        G,
        1.0,
    )
    return adv.reshape(-1), ret.reshape(-1)


@pytest.mark.parametrize(("obs", "rows"), [("box", 2048), ("box", 4), ("dict", 5)])
def test_on_policy_it_is_gae_lambda_one(
    obs: str, rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ppo, "EVAL_ROWS", rows)  # 4, 5: chunks that do not divide T * B
    learner = _learner(obs)
    batch = _rollout(learner.model, obs, np.random.default_rng(0))
    stats = learner.vtrace(batch, T, G)
    assert stats == {"vtrace_rho": pytest.approx(1.0), "vtrace_clipped": 0.0}
    adv, ret = _gae_one(learner.model, batch)
    np.testing.assert_allclose(batch["advantages"], adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(batch["returns"], ret, rtol=1e-5, atol=1e-5)
    values, _ = _current_values(learner.model, batch)
    np.testing.assert_allclose(batch["values"], values.reshape(-1), rtol=1e-6)
    for key in ("advantages", "returns", "values"):
        assert batch[key].dtype == np.float32
        assert batch[key].shape == (T * B,)


def test_the_current_policy_is_evaluated_within_the_masks() -> None:
    rng = np.random.default_rng(1)
    learner = _learner("box", head_for(gym.spaces.Discrete(4)), actions=4)
    masks = rng.random((T * B, 4)) < 0.5
    masks[:, 2] = True  # every row allows an action
    batch = _rollout(learner.model, "box", rng, masks)
    assert all(masks[np.arange(T * B), batch["actions"]])  # acted within them
    unmasked = {k: v for k, v in batch.items() if k != "masks"}

    stats = learner.vtrace(batch, T, G)
    assert stats == {"vtrace_rho": pytest.approx(1.0), "vtrace_clipped": 0.0}
    adv, ret = _gae_one(learner.model, batch)
    np.testing.assert_allclose(batch["advantages"], adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(batch["returns"], ret, rtol=1e-5, atol=1e-5)
    # without the masks the current policy spreads over illegal actions as well: the
    # same behaviour looks off-policy (every legal action more likely under mu)
    stats = learner.vtrace(unmasked, T, G)
    assert stats["vtrace_rho"] < 0.9


def test_off_policy_it_is_vtrace_of_the_current_model() -> None:
    rng = np.random.default_rng(2)
    learner = _learner("box", actions=3)
    batch = _rollout(learner.model, "box", rng)
    behaviour = batch["logprobs"].copy()
    with torch.no_grad():  # the learner moved on from the weights that acted
        for p in learner.model.parameters():
            p.add_(0.3 * torch.randn_like(p))
        obs, actions = torch.as_tensor(batch["obs"]), torch.as_tensor(batch["actions"])
        current = learner.model.evaluate(obs, actions)[0].numpy()
    values, last = _current_values(learner.model, batch)
    next_values = np.concatenate([values[1:], last[None]])
    next_values[1, 0] = 0.0  # terminated
    next_values[3, 1] = 2.5  # truncated: the behaviour's value of its last observation
    ends = (batch["terminated"] | batch["truncated"]).reshape(T, B)
    log_rhos = (current - behaviour).reshape(T, B)
    rewards = batch["rewards"].reshape(T, B)
    vs, adv = vtrace(log_rhos, rewards, values, next_values, ends, G, 1.2, 0.8)

    stats = learner.vtrace(batch, T, G, rho_bar=1.2, c_bar=0.8)
    ratios = np.exp(log_rhos)
    assert stats["vtrace_rho"] == pytest.approx(ratios.mean(), rel=1e-5)
    assert stats["vtrace_clipped"] == pytest.approx((ratios > 1.2).mean())
    assert 0 < stats["vtrace_clipped"] < 1
    np.testing.assert_allclose(batch["advantages"], adv.reshape(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(batch["returns"], vs.reshape(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(batch["values"], values.reshape(-1), rtol=1e-6)
    np.testing.assert_array_equal(batch["logprobs"], behaviour)  # the ratio's denominator

    # the relabelled batch, V-trace's inputs and all, goes through the minibatch steps
    out = learner.update(batch, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in out.values())


def test_a_batch_that_is_not_whole_steps_is_refused() -> None:
    learner = _learner("box")
    batch = _rollout(learner.model, "box", np.random.default_rng(3))
    with pytest.raises(ValueError, match="steps"):
        learner.vtrace(batch, 4, G)
