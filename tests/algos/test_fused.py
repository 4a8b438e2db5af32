"""The fused gradient steps (`pararl.algos.fused`) against the plain one: the same
loss, TD errors or PPO statistics, and the same parameters and optimizer state after
several updates, for each algorithm and network (prioritized weights, n-step returns
and action masks included). The traced steps compile with the "aot_eager" backend
(dynamo's graph capture and AOT autograd, seconds on this CPU), one case with inductor.

Each program compiled costs seconds (~5 s here), so the cases share out the variants
and networks between them, each compiled once: a learner compiles one program per
variant of its step (DQN: with importance weights or not, with masks or not; PPO: the
last epoch's, which also returns approx_kl and clipfrac, and the others'), so only one
PPO case runs two epochs; DQN's cases take each branch of the target (double or not,
masked or not) and the loss (weighted or not) once, on the MLP and the Nature CNN,
PPO's the MinAtar CNN. SAC's step is here too: the compiling tests run in one xdist
worker (tests/conftest.py's XDIST_GROUPS), which pays dynamo's first compile (~5 s of
imports and set-up) once."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl.algos import fused
from pararl.algos.dqn import DQNState
from pararl.algos.fused import FusedStep, resolve_step_mode
from pararl.algos.ppo import PPOHyper, PPOLearner
from pararl.config import DQNConfig, env_kind
from pararl.models.build import actor_critic
from pararl.models.heads import head_for
from pararl.replay.nstep import Transitions

CPU = torch.device("cpu")
SPACES = {
    "mlp": (gym.spaces.Box(-1, 1, (4,), np.float32), 2),
    "minatar-cnn": (gym.spaces.Box(0, 1, (10, 10, 4), np.bool_), 3),
    "nature-cnn": (gym.spaces.Box(0, 255, (4, 36, 36), np.uint8), 4),  # smallest Nature size
}


@pytest.fixture
def aot_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fused, "BACKEND", "aot_eager")


def _obs(space: gym.spaces.Box, n: int, rng: np.random.Generator) -> np.ndarray:
    if space.dtype == np.uint8:
        return rng.integers(0, 256, (n, *space.shape), dtype=np.uint8)
    if space.dtype == np.bool_:
        return rng.random((n, *space.shape)) < 0.2
    return rng.standard_normal((n, *space.shape)).astype(np.float32)


def _dqn(model: str, setting: str, n_step: int, double: bool, masked: bool = False) -> DQNState:
    space, actions = SPACES[model]
    torch.manual_seed(0)
    cfg = DQNConfig(
        env="x", compile=setting, model=model, n_step=n_step, double_dqn=double,  # type: ignore[arg-type]
        target_update=2, hidden=(32, 32),
    )  # fmt: skip
    act_space = gym.spaces.Discrete(actions)
    kind = env_kind(space, act_space)
    return DQNState(cfg.for_env(kind), space, act_space, CPU, action_masks=masked)


def _dqn_updates(state: DQNState, prioritized: bool) -> list[Any]:
    """4 updates on random batches (with the next observations' action masks, every
    one allowing the last action, when the learner takes masks)."""
    space, actions = SPACES[state.settings.model]
    rng, out = np.random.default_rng(1), []
    for _ in range(4):
        n = state.settings.batch_size
        batch = Transitions(
            _obs(space, n, rng),
            rng.integers(0, actions, n),
            rng.standard_normal(n).astype(np.float32),
            _obs(space, n, rng),
            np.where(rng.random(n) < 0.2, 0.0, 0.99**state.settings.n_step).astype(np.float32),
        )
        if state.mask_size:
            batch.next_mask = rng.random((n, actions)) < 0.5
            batch.next_mask[:, -1] = True
        weights = rng.random(n).astype(np.float32) if prioritized else None
        stats, td_error = state.learner.update(batch, weights)
        out.append((stats["loss"].clone(), stats["q_mean"].clone(), td_error.clone()))
    return out


@pytest.mark.usefixtures("aot_eager")
@pytest.mark.parametrize(
    ("model", "n_step", "double", "prioritized", "masked"),
    [
        ("mlp", 3, True, True, True),  # the double target among the legal next actions
        ("nature-cnn", 1, False, False, False),  # (MinAtar's CNN: PPO's case)
    ],
)
def test_dqn_compiled_step_is_the_plain_step(
    model: str, n_step: int, double: bool, prioritized: bool, masked: bool
) -> None:
    plain = _dqn(model, "off", n_step, double, masked)
    fast = _dqn(model, "on", n_step, double, masked)
    assert (plain.learner.step_mode, fast.learner.step_mode) == ("eager", "compile")
    for a, b in zip(_dqn_updates(plain, prioritized), _dqn_updates(fast, prioritized), strict=True):
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    p, f = plain.learner, fast.learner
    torch.testing.assert_close(p.optimizer.flat, f.optimizer.flat, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(p.optimizer.flat_grad, f.optimizer.flat_grad, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(p.optimizer.exp_avg_sq, f.optimizer.exp_avg_sq)
    for x, y in zip(p.q_target.parameters(), f.q_target.parameters(), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)  # the target copies agree
    assert p.optimizer.steps == f.optimizer.steps == 4


def test_dqn_step_compiled_by_inductor_is_the_plain_step() -> None:
    plain, fast = _dqn("mlp", "off", 3, True), _dqn("mlp", "on", 3, True)
    for a, b in zip(_dqn_updates(plain, True), _dqn_updates(fast, True), strict=True):
        torch.testing.assert_close(a[2], b[2], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(
        plain.learner.optimizer.flat, fast.learner.optimizer.flat, rtol=1e-5, atol=1e-6
    )


def _ppo(model: str, discrete: bool, setting_mode: str, epochs: int) -> PPOLearner:
    space, actions = SPACES[model] if model != "mlp" else (gym.spaces.Box(-1, 1, (5,)), 3)
    torch.manual_seed(0)
    net = actor_critic(model, space.shape, space.dtype, actions, discrete, (16, 16))  # type: ignore[arg-type]
    hyper = PPOHyper(
        clip_coef=0.2, clip_vloss=True, ent_coef=0.01, vf_coef=0.5, update_epochs=epochs,
        num_minibatches=2,
    )  # fmt: skip
    return PPOLearner(net, hyper, 1e-3, CPU, setting_mode)  # type: ignore[arg-type]


@pytest.mark.usefixtures("aot_eager")
@pytest.mark.parametrize(
    ("model", "discrete", "epochs"),
    # a Gaussian under MLPs, and a Categorical under a shared CNN trunk (2 epochs: both
    # programs); the MultiDiscrete head with masks: test_masked_ppo_step_...
    [("mlp", False, 1), ("minatar-cnn", True, 2)],
)
def test_ppo_compiled_step_is_the_plain_step(model: str, discrete: bool, epochs: int) -> None:
    learners = [_ppo(model, discrete, mode, epochs) for mode in ("eager", "compile")]
    space = SPACES[model][0] if model != "mlp" else gym.spaces.Box(-1, 1, (5,))
    rng, n = np.random.default_rng(2), 64
    batch = {
        "obs": _obs(space, n, rng),  # type: ignore[arg-type]
        "actions": rng.integers(0, 3, n) if discrete else rng.standard_normal((n, 3)),
        "logprobs": (-1 - rng.random(n)).astype(np.float32),
        "values": rng.standard_normal(n).astype(np.float32),
        "advantages": rng.standard_normal(n).astype(np.float32),
        "returns": rng.standard_normal(n).astype(np.float32),
    }
    batch["actions"] = batch["actions"].astype(np.int64 if discrete else np.float32)
    stats = []
    for learner in learners:
        out = []
        for k in range(3):  # lr and clip annealed between updates: one program for all
            learner.set_lr_fraction(1 - k / 4)
            learner.set_clip_fraction(1 - k / 4)
            out.append(learner.update(batch, np.random.default_rng(k)))
        stats.append(out)
    for a, b in zip(*stats, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6)
    plain, fast = learners
    torch.testing.assert_close(plain.optimizer.flat, fast.optimizer.flat, rtol=1e-5, atol=1e-6)
    assert fast.updates == plain.updates == 3 * 2 * epochs  # updates x minibatches x epochs


@pytest.mark.usefixtures("aot_eager")
def test_masked_ppo_step_compiled_is_the_plain_step() -> None:
    """PPO's step with action masks as one more input, on MultiDiscrete actions (DQN's
    masked target: test_dqn_compiled_step_is_the_plain_step's mlp case)."""
    head = head_for(gym.spaces.MultiDiscrete([3, 2]))
    rng, n = np.random.default_rng(3), 64
    mask = rng.random((n, 5)) < 0.6
    mask[:, [0, 3]] = True  # every dimension allows an action
    batch = {
        "obs": rng.standard_normal((n, 5)).astype(np.float32),
        "actions": np.stack([np.zeros(n, np.int64), np.ones(n, np.int64)], -1),
        "logprobs": (-1 - rng.random(n)).astype(np.float32),
        "values": rng.standard_normal(n).astype(np.float32),
        "advantages": rng.standard_normal(n).astype(np.float32),
        "returns": rng.standard_normal(n).astype(np.float32),
        "masks": mask,
    }
    hyper = PPOHyper(ent_coef=0.01, update_epochs=1, num_minibatches=2)
    ppo = []
    for mode in ("eager", "compile"):
        torch.manual_seed(0)
        net = actor_critic("mlp", (5,), np.float32, 5, True, (16,), head=head)
        learner = PPOLearner(net, hyper, 1e-3, CPU, mode)  # type: ignore[arg-type]
        ppo.append((learner.update(batch, np.random.default_rng(0)), learner))
    assert ppo[0][0] == pytest.approx(ppo[1][0], rel=1e-4, abs=1e-6)
    torch.testing.assert_close(ppo[0][1].optimizer.flat, ppo[1][1].optimizer.flat)


@pytest.mark.usefixtures("aot_eager")
@pytest.mark.parametrize("prioritized", [False, True])
def test_sac_compiled_step_is_the_plain_step(prioritized: bool) -> None:
    """SAC's tiny learner of tests/algos/test_sac.py, with and without importance
    weights."""
    from tests.algos.test_sac import batch, learner

    plain, fast = learner("off"), learner("on")
    assert (plain.step_mode, fast.step_mode) == ("eager", "compile")
    rng = np.random.default_rng(3)
    for k in range(3):
        obs, action, ret, next_obs, discount, _ = batch(seed=k, n=8)
        data = Transitions(
            obs.numpy(), action.numpy(), ret.numpy(), next_obs.numpy(), discount.numpy()
        )
        weights = rng.random(8).astype(np.float32) if prioritized else None
        a, td_a = plain.update(data, weights)
        b, td_b = fast.update(data, weights)
        assert a.keys() == b.keys()
        for key in a:
            torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(td_a, td_b, rtol=1e-5, atol=1e-6)
    for p, f in (
        (plain.actor_optimizer, fast.actor_optimizer),
        (plain.critic_optimizer, fast.critic_optimizer),
        (plain.alpha_optimizer, fast.alpha_optimizer),
    ):
        torch.testing.assert_close(p.flat, f.flat, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(p.exp_avg_sq, f.exp_avg_sq, rtol=1e-4, atol=1e-8)
        assert p.steps == f.steps == 3
    torch.testing.assert_close(plain.target_flat, fast.target_flat, rtol=1e-5, atol=1e-6)


def test_step_modes() -> None:
    cuda = torch.device("cuda")
    assert [resolve_step_mode(s, CPU) for s in ("off", "on", "auto")] == [
        "eager",
        "compile",
        "eager",
    ]
    assert [resolve_step_mode(s, cuda) for s in ("off", "on", "auto")] == [
        "eager",
        "compile+graph",
        "graph",
    ]
    # auto compiles only where the algorithm says it repays its cost
    assert resolve_step_mode("auto", CPU, compile_pays=True) == "compile"
    assert resolve_step_mode("off", CPU, compile_pays=True) == "eager"
    assert resolve_step_mode("auto", cuda, compile_pays=True) == "compile+graph"
    assert resolve_step_mode("off", cuda, compile_pays=True) == "eager"
    with pytest.raises(ValueError, match="CUDA device"):
        FusedStep(lambda x: (x,), "graph", CPU)
    with pytest.raises(ValueError, match="must be auto, on or off"):
        resolve_step_mode("fast", CPU)
