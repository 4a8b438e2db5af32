"""SAC's update against a hand computation on a tiny batch: the twin critics' soft
TD targets (their min; truncation bootstrapped, termination not), the critic, actor
and temperature losses, the temperature's gradient and Adam step, the gradients each
optimizer gets, and the Polyak update of the target critics (the compiled step equal to
the plain one: tests/algos/test_fused.py, with the other compiled steps)."""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl.algos import fused
from pararl.algos.sac import SACLearner, SACState
from pararl.config import SACConfig
from pararl.models import TwinQ, squashed_actor
from pararl.replay.nstep import NStepBuilder

CPU = torch.device("cpu")
OBS, ACT, BATCH = 2, 1, 3
LOW, HIGH = np.array([-2.0], np.float32), np.array([2.0], np.float32)
TAU, LR, ALPHA = 0.1, 1e-3, 0.5


def learner(setting: str = "off", seed: int = 0) -> SACLearner:
    torch.manual_seed(seed)
    cfg = SACConfig(env="x", hidden=(4,), lr=LR, tau=TAU, alpha=ALPHA, compile=setting)  # type: ignore[arg-type]
    cfg = cfg.for_env("continuous").config
    actor = squashed_actor(OBS, ACT, cfg.hidden, LOW, HIGH)
    mode = fused.resolve_step_mode(setting, CPU)
    return SACLearner(actor, TwinQ(OBS, ACT, cfg.hidden), cfg, CPU, mode, noise_seed=1)


def batch(seed: int = 0, n: int = BATCH) -> list[torch.Tensor]:
    """obs, action, ret, next_obs, discount (one terminated row), noise [2, B, A]."""
    g = torch.Generator().manual_seed(seed)
    discount = torch.full((n,), 0.99)
    discount[0] = 0.0
    return [
        torch.randn(n, OBS, generator=g),
        (torch.rand(n, ACT, generator=g) * 4 - 2),
        torch.randn(n, generator=g),
        torch.randn(n, OBS, generator=g),
        discount,
        torch.randn(2, n, ACT, generator=g),
    ]


# --- the hand computation: every network written out as its layers' arithmetic ---


def actor_by_hand(
    params: dict[str, torch.Tensor], obs: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """a = 2 tanh(mean + std noise) on [-2, 2], and its log-density: the Gaussian's
    less log |da/dx| = log(2 (1 - tanh(x)^2))."""
    h = torch.relu(obs.double() @ params["body.0.0.weight"].T + params["body.0.0.bias"])
    out = h @ params["head.weight"].T + params["head.bias"]
    mean, log_std = out[:, :ACT], out[:, ACT:].clamp(-20, 2)
    x = mean + log_std.exp() * noise
    gauss = -0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi)
    log_prob = (gauss - torch.log(2.0 * (1.0 - torch.tanh(x) ** 2))).sum(-1)
    return 2.0 * torch.tanh(x), log_prob


def critic_by_hand(
    params: dict[str, torch.Tensor], j: int, obs: torch.Tensor, action: torch.Tensor
) -> torch.Tensor:
    x = torch.cat([obs.double(), action.double()], -1)
    h = torch.relu(x @ params["weights.0"][j] + params["biases.0"][j, 0])
    return (h @ params["weights.1"][j] + params["biases.1"][j, 0]).squeeze(-1)


def snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().double().clone() for k, v in module.state_dict().items()}


def test_losses_gradients_and_temperature_step_match_a_hand_computation() -> None:
    sac = learner()
    obs, action, ret, next_obs, discount, noise = batch()
    actor0, critic0, target0 = (
        snapshot(sac.actor),
        snapshot(sac.critic),
        snapshot(sac.critic_target),
    )
    log_alpha0 = float(sac.log_alpha)

    critic_loss, actor_loss, alpha_loss, alpha, q_mean, entropy, td_error = sac._step(
        obs, action, ret, next_obs, discount, noise
    )

    # soft TD target from the target critics' min, the entropy term at alpha
    next_action, next_log_pi = actor_by_hand(actor0, next_obs, noise[0].double())
    next_q = torch.minimum(
        critic_by_hand(target0, 0, next_obs, next_action),
        critic_by_hand(target0, 1, next_obs, next_action),
    )
    y = ret.double() + discount.double() * (next_q - ALPHA * next_log_pi)
    q = torch.stack([critic_by_hand(critic0, j, obs, action) for j in (0, 1)])
    assert float(alpha) == pytest.approx(ALPHA)
    assert float(critic_loss) == pytest.approx(float((0.5 * ((q - y) ** 2).sum(0)).mean()), 1e-5)
    assert float(q_mean) == pytest.approx(float(q.mean()), 1e-5)
    torch.testing.assert_close(td_error.double(), (y - q).abs().mean(0), rtol=1e-5, atol=1e-6)

    # the actor's loss at its own (pre-step) sample, valued by the updated critics
    critic1 = snapshot(sac.critic)
    pi_action, log_pi = actor_by_hand(actor0, obs, noise[1].double())
    min_q_pi = torch.minimum(*(critic_by_hand(critic1, j, obs, pi_action) for j in (0, 1)))
    assert float(actor_loss) == pytest.approx(float((ALPHA * log_pi - min_q_pi).mean()), 1e-5)
    assert float(entropy) == pytest.approx(float(-log_pi.mean()), 1e-5)

    # temperature: J = -mean(alpha (log pi + H)), H = -|A|; dJ/dlog alpha = J itself
    hand_alpha_loss = -(ALPHA * (log_pi + -ACT)).mean()
    assert float(alpha_loss) == pytest.approx(float(hand_alpha_loss), 1e-5)
    grad = float(sac.alpha_optimizer.flat_grad[0])
    assert grad == pytest.approx(float(hand_alpha_loss), 1e-5)
    # Adam's first step moves log alpha by lr against the gradient's sign
    assert float(sac.log_alpha) == pytest.approx(log_alpha0 - LR * grad / (abs(grad) + 1e-8))


def test_each_optimizer_gets_its_own_losss_gradient() -> None:
    """The critics' gradient is that of the critic loss alone: the actor's loss, which
    runs through the critics, leaves it untouched."""
    sac = learner()
    inputs = batch()
    obs, action, ret, next_obs, discount, noise = inputs
    critic = copy.deepcopy(sac.critic)
    y = sac.soft_td_target(ret, next_obs, discount, noise[0], sac.log_alpha.detach().exp())
    loss = (0.5 * ((critic(obs, action) - y) ** 2).sum(0)).mean()
    expected = torch.autograd.grad(loss, list(critic.parameters()))
    sac._step(*inputs)
    got = [p.grad for p in sac.critic_optimizer.params]
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-7)
    assert sac.actor_optimizer.flat_grad.abs().sum() > 0


def test_polyak_update_of_the_target_critics() -> None:
    sac = learner()
    before = [p.detach().clone() for p in sac.critic_target.parameters()]
    sac._step(*batch())
    after_critic = [p.detach() for p in sac.critic.parameters()]
    for target, old, new in zip(sac.critic_target.parameters(), before, after_critic, strict=True):
        torch.testing.assert_close(target, (1 - TAU) * old + TAU * new)
    # and after a checkpoint round trip the targets still follow their flat vector
    copy_ = learner(seed=5)
    copy_.load_state_dict(sac.state_dict())
    copy_.target_flat.add_(1.0)
    first = next(iter(copy_.critic_target.parameters()))
    torch.testing.assert_close(first, next(iter(sac.critic_target.parameters())) + 1.0)


def test_min_targets_bootstrap_truncation_and_not_termination() -> None:
    """Transitions built as the actors build them (n-step builder, continuous actions):
    an episode that terminates gets y = r; one cut by the time limit gets r plus the
    discounted soft value of its last observation, under the smaller target critic."""
    gamma = 0.99
    builder = NStepBuilder(2, (OBS,), 1, gamma, np.float32, (ACT,), np.float32)
    obs = np.zeros((2, OBS), np.float32)
    last = np.array([[0.3, -0.2], [0.5, 0.1]], np.float32)
    ended = builder.add(
        obs,
        np.array([[0.5], [-1.0]], np.float32),
        np.array([1.0, 2.0]),
        last,
        np.array([True, False]),  # env 0 terminates
        np.array([False, True]),  # env 1 is truncated
    )
    assert ended.action.dtype == np.float32
    assert ended.action.shape == (2, ACT)
    np.testing.assert_array_equal(ended.discount, [0.0, gamma])
    sac = learner()
    with torch.no_grad():  # the second target critic a lot larger: the min is the first's
        sac.critic_target.biases[-1][1].add_(100.0)
    noise = torch.randn(2, ACT)
    ret = torch.tensor(ended.ret, dtype=torch.float32)
    next_obs = torch.tensor(ended.next_obs)
    discount = torch.tensor(ended.discount, dtype=torch.float32)
    y = sac.soft_td_target(ret, next_obs, discount, noise, torch.tensor(ALPHA))
    assert float(y[0]) == 1.0  # terminated: no bootstrap at all
    target = snapshot(sac.critic_target)
    next_action, next_log_pi = actor_by_hand(snapshot(sac.actor), next_obs, noise.double())
    first = critic_by_hand(target, 0, next_obs, next_action)
    assert (first < critic_by_hand(target, 1, next_obs, next_action)).all()
    expected = 2.0 + gamma * (first[1] - ALPHA * next_log_pi[1])
    assert float(y[1]) == pytest.approx(float(expected), 1e-5)


def test_discrete_and_unbounded_action_spaces_are_refused() -> None:
    from pararl.errors import UsageError

    obs = gym.spaces.Box(-1, 1, (3,), np.float32)
    cfg = SACConfig(env="x").for_env("continuous")
    with pytest.raises(UsageError, match="continuous"):
        SACState(cfg, obs, gym.spaces.Discrete(2), CPU)
    with pytest.raises(UsageError, match="not finite"):
        SACState(cfg, obs, gym.spaces.Box(-np.inf, np.inf, (1,), np.float32), CPU)
    images = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    with pytest.raises(UsageError, match="vector observations"):
        SACState(cfg, images, gym.spaces.Box(-1, 1, (1,), np.float32), CPU)


def test_auto_compiles_a_long_run_only_on_a_gpu_or_more_than_one_cpu_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pararl.algos import sac

    monkeypatch.setattr(sac, "physical_cores", lambda: 2)

    def pays(mode: str = "async", device: str = "cpu", **fields: object) -> bool:
        cfg = SACConfig(env="x", **fields).for_env("continuous").config  # type: ignore[arg-type]
        return sac.compile_pays(cfg, mode, torch.device(device))

    # MuJoCo's defaults: 1M steps, batch 256, async: the learner on both cores
    assert pays()
    assert not pays("serial")  # one learner thread: compiling gained nothing
    assert not pays(total_steps=50_000)  # too few updates to repay the compile
    assert not pays(batch_size=64)  # a narrow update keeps one thread
    assert not pays(learner_threads=1)
    assert pays("serial", learner_threads=2)
    # on a GPU the threads do not matter, the budget does
    assert pays("serial", "cuda", learner_threads=1)
    assert not pays(device="cuda", total_steps=50_000)
    monkeypatch.setattr(sac, "physical_cores", lambda: 1)
    assert not pays()
