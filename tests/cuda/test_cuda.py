"""Learning on a GPU (skipped without CUDA; `make gpu-check` runs them): each fused
step on CUDA against the plain step on the CPU (SAC's: on the same GPU, whose noise
stream the CPU's cannot reproduce), and whole runs with the learner on the GPU
(acting stays on the CPU)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl import DQNConfig, PPOConfig, checkpoint, train
from pararl.algos.dqn import DQNState
from pararl.algos.fused import resolve_step_mode
from pararl.algos.ppo import PPOHyper, PPOLearner
from pararl.algos.sac import SACLearner
from pararl.config import MAMLConfig, SACConfig, env_kind
from pararl.models import TwinQ, squashed_actor
from pararl.models.build import actor_critic
from pararl.observations import leaves
from pararl.optim import FlatAdam
from pararl.replay.nstep import Transitions

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
CPU, CUDA = torch.device("cpu"), torch.device("cuda")
MINATAR = gym.spaces.Box(0, 1, (10, 10, 4), np.bool_)
SMALL: dict[str, Any] = dict(
    total_steps=3_000, eval_every=1_500, eval_episodes=2, tensorboard=False, progress="none"
)


def _dqn(device: torch.device, setting: str, model: str) -> DQNState:
    space = MINATAR if model == "minatar-cnn" else gym.spaces.Box(-1, 1, (4,), np.float32)
    torch.manual_seed(0)
    cfg = DQNConfig(
        env="x", compile=setting, model=model, n_step=3, double_dqn=True,  # type: ignore[arg-type]
        target_update=3, hidden=(64, 64),
    )  # fmt: skip
    act_space = gym.spaces.Discrete(3)
    return DQNState(cfg.for_env(env_kind(space, act_space)), space, act_space, device)


def _dqn_run(state: DQNState, prioritized: bool) -> list[torch.Tensor]:
    rng, errors = np.random.default_rng(1), []
    space = MINATAR if state.settings.model == "minatar-cnn" else None
    for _ in range(8):  # past the warm-up and the recording
        n = state.settings.batch_size

        def obs(n: int = n) -> np.ndarray:
            if space is not None:
                return rng.random((n, 10, 10, 4)) < 0.2
            return rng.standard_normal((n, 4)).astype(np.float32)

        batch = Transitions(
            obs(), rng.integers(0, 3, n), rng.standard_normal(n).astype(np.float32), obs(),
            np.where(rng.random(n) < 0.2, 0.0, 0.97).astype(np.float32),
        )  # fmt: skip
        weights = rng.random(n).astype(np.float32) if prioritized else None
        errors.append(state.learner.update(batch, weights)[1].cpu())
    return errors


@pytest.mark.parametrize("model", ["mlp", "minatar-cnn"])
@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize("setting", ["off", "auto", "on"])
def test_dqn_steps_on_cuda_match_the_cpu(model: str, prioritized: bool, setting: str) -> None:
    reference = _dqn(CPU, "off", model)
    gpu = _dqn(CUDA, setting, model)
    assert (
        gpu.learner.step_mode == {"off": "eager", "auto": "graph", "on": "compile+graph"}[setting]
    )
    for a, b in zip(_dqn_run(reference, prioritized), _dqn_run(gpu, prioritized), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(
        reference.learner.optimizer.flat, gpu.learner.optimizer.flat.cpu(), rtol=1e-4, atol=1e-5
    )
    assert gpu.learner.optimizer.steps == 8


def _ppo_batch(discrete: bool) -> dict[str, np.ndarray]:
    rng, n = np.random.default_rng(2), 256
    obs = rng.random((n, 10, 10, 4)) < 0.2 if discrete else rng.standard_normal((n, 5))
    actions = rng.integers(0, 3, n) if discrete else rng.standard_normal((n, 3))
    return {
        "obs": obs.astype(np.bool_ if discrete else np.float32),
        "actions": actions.astype(np.int64 if discrete else np.float32),
        "logprobs": (-1 - rng.random(n)).astype(np.float32),
        "values": rng.standard_normal(n).astype(np.float32),
        "advantages": rng.standard_normal(n).astype(np.float32),
        "returns": rng.standard_normal(n).astype(np.float32),
    }


def _ppo_params(
    model: str, device: torch.device, mode: str, anneal: bool, capturable: bool | None = None
) -> torch.Tensor:
    """The parameters after three updates (lr and clip annealed between them, if asked);
    `capturable`: the optimizer's arithmetic, if not the mode's own."""
    discrete = model == "minatar-cnn"
    space = MINATAR if discrete else gym.spaces.Box(-1, 1, (5,), np.float32)
    torch.manual_seed(0)
    net = actor_critic(model, space.shape, space.dtype, 3, discrete, (32, 32))  # type: ignore[arg-type]
    hyper = PPOHyper(clip_coef=0.2, clip_vloss=True, ent_coef=0.01, update_epochs=2)
    learner = PPOLearner(net, hyper, 1e-3, device, mode)  # type: ignore[arg-type]
    if capturable is not None and capturable != learner.optimizer.capturable:
        learner.optimizer = FlatAdam(learner.model.parameters(), 1e-3, eps=1e-5, capturable=True)
    batch = _ppo_batch(discrete)
    for k in range(3):
        if anneal:
            learner.set_lr_fraction(1 - k / 4)
            learner.set_clip_fraction(1 - k / 4)
        learner.update(batch, np.random.default_rng(k))
    return learner.optimizer.flat.cpu()


@pytest.mark.parametrize("model", ["mlp", "minatar-cnn"])
@pytest.mark.parametrize("mode", ["graph", "compile+graph"])
def test_ppo_steps_on_cuda_match_the_plain_step(model: str, mode: str) -> None:
    """A recorded (compiled) step gives the plain CUDA step's parameters. With the lr
    and clip range annealed between updates (the recorded step reads both from device
    tensors), it matches the plain step with the same optimizer arithmetic (device
    tensors for lr and step count); the plain step with Python numbers differs from it
    in the last bits, and a sample whose ratio then falls on the other side of the clip
    boundary moves the weights it touches by up to a step (seen: 5e-4), so that
    comparison, like the one with the CPU, is held to 2e-3. Compiled, the optimizer's
    arithmetic on the device lr is fused into one kernel whose rounding differs in the
    last bits (seen on an H100: 2.6e-6 on 2 of 132k MinAtar weights): held to 2e-5."""
    plain = _ppo_params(model, CUDA, "eager", anneal=False)
    fused = _ppo_params(model, CUDA, mode, anneal=False)
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-6)
    annealed = _ppo_params(model, CUDA, mode, anneal=True)
    same_arithmetic = _ppo_params(model, CUDA, "eager", anneal=True, capturable=True)
    tight = mode == "graph"
    torch.testing.assert_close(
        annealed, same_arithmetic, rtol=1e-5 if tight else 1e-4, atol=1e-6 if tight else 2e-5
    )
    python_numbers = _ppo_params(model, CUDA, "eager", anneal=True)
    cpu = _ppo_params(model, CPU, "eager", anneal=True)
    torch.testing.assert_close(annealed, python_numbers, rtol=0, atol=2e-3)
    torch.testing.assert_close(python_numbers, cpu, rtol=0, atol=2e-3)


def _dict_params(mode: str) -> torch.Tensor:
    """A multi-input actor-critic's parameters after three updates on one batch of
    Dict observations (an image, a vector and a discrete leaf)."""
    space = gym.spaces.Dict(
        {
            "image": gym.spaces.Box(0, 255, (3, 16, 16), np.uint8),
            "vector": gym.spaces.Box(-1, 1, (4,), np.float32),
            "count": gym.spaces.Discrete(3),
        }
    )
    torch.manual_seed(0)
    net = actor_critic("multi-input", (), np.float32, 2, True, (32,), leaves=leaves(space))
    learner = PPOLearner(net, PPOHyper(update_epochs=2), 1e-3, CUDA, mode)  # type: ignore[arg-type]
    rng, n = np.random.default_rng(0), 256
    batch = {
        "obs": {
            "count": rng.integers(0, 3, n),
            "image": rng.integers(0, 256, (n, 3, 16, 16), dtype=np.uint8),
            "vector": rng.standard_normal((n, 4)).astype(np.float32),
        },
        "actions": rng.integers(0, 2, n),
        "logprobs": np.full(n, np.log(0.5), np.float32),
        "values": np.zeros(n, np.float32),
        "advantages": rng.standard_normal(n).astype(np.float32),
        "returns": rng.standard_normal(n).astype(np.float32),
    }
    for k in range(3):
        learner.update(batch, np.random.default_rng(k))
    return learner.optimizer.flat.cpu()


def test_a_recorded_ppo_step_takes_dict_observations_as_the_plain_step_does() -> None:
    """A Dict observation's leaves are recorded inputs of the CUDA graph, one each."""
    torch.testing.assert_close(_dict_params("graph"), _dict_params("eager"), rtol=1e-5, atol=1e-6)


def test_ppo_trains_on_dict_observations_with_the_learner_on_cuda(tmp_path: Path) -> None:
    run = tmp_path / "dict"
    cfg = PPOConfig(
        env="pararl/DictCue-v0",
        mode="serial",
        learn_device="cuda",
        act_device="cpu",
        run_dir=run,
        **SMALL,
    )
    train(cfg)
    assert _resolved(run)["step_mode"] == "graph"
    assert checkpoint.load(run / "checkpoints" / "final.pt")["env_steps"] >= 3_000


@pytest.fixture(autouse=True)
def _fp32() -> Any:
    """fp32 arithmetic in cuDNN (its convolutions default to TF32, whose 10-bit mantissa
    is not float rounding), so that two ways of running one step can be compared."""
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = saved


def _resolved(run: Path) -> dict[str, Any]:
    return json.loads((run / "config.json").read_text())["resolved"]


@pytest.mark.parametrize("mode", ["serial", "async"])
def test_dqn_trains_with_the_learner_on_cuda(tmp_path: Path, mode: str) -> None:
    run = tmp_path / mode
    # 2 actors: many actors' first chunks together could hold the whole small budget
    cfg = DQNConfig(mode=mode, device="cuda", learning_starts=500, workers=2, run_dir=run, **SMALL)  # type: ignore[arg-type]
    train(cfg)
    resolved = _resolved(run)
    assert resolved["device"].startswith("cuda")
    assert resolved["step_mode"] == "graph"
    state = checkpoint.load(run / "checkpoints" / "final.pt")
    assert state["env_steps"] >= 3_000
    assert state["learner"]["updates"] > 100


def test_ppo_trains_with_the_learner_on_cuda(tmp_path: Path) -> None:
    run = tmp_path / "ppo"
    train(PPOConfig(mode="serial", learn_device="cuda", act_device="cpu", run_dir=run, **SMALL))
    resolved = _resolved(run)
    assert resolved["devices"]["learn"].startswith("cuda")
    assert resolved["step_mode"] == "graph"
    assert checkpoint.load(run / "checkpoints" / "final.pt")["env_steps"] >= 3_000


def test_maml_trains_on_cuda(tmp_path: Path) -> None:
    run = tmp_path / "maml"
    cfg = MAMLConfig(
        env="pararl/Navigation2D-v0", meta_iterations=2, meta_batch_size=4, fast_batch_size=4,
        episode_length=20, workers=1, device="cuda", run_dir=run, progress="none",
        tensorboard=False,
    )  # fmt: skip
    train(cfg)
    assert checkpoint.load(run / "checkpoints" / "final.pt")["env_steps"] > 0


def _sac(setting: str) -> SACLearner:
    torch.manual_seed(0)
    cfg = SACConfig(env="x", compile=setting, hidden=(64, 64)).for_env("continuous").config  # type: ignore[arg-type]
    bound = np.ones(2, np.float32)
    actor, critic = squashed_actor(5, 2, cfg.hidden, -bound, bound), TwinQ(5, 2, cfg.hidden)
    return SACLearner(actor, critic, cfg, CUDA, resolve_step_mode(setting, CUDA), noise_seed=3)


@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize("setting", ["auto", "on"])
def test_sac_step_recorded_on_cuda_is_the_plain_step(setting: str, prioritized: bool) -> None:
    """SAC's whole update (critics, actor, temperature, targets) recorded as a CUDA graph
    (and compiled) against the same update run as written on the same GPU, with the same
    noise stream."""
    plain, fast = _sac("off"), _sac(setting)
    assert fast.step_mode == {"auto": "graph", "on": "compile+graph"}[setting]
    rng = np.random.default_rng(1)
    for _ in range(8):  # past the warm-up and the recording
        n = 64
        batch = Transitions(
            rng.standard_normal((n, 5)).astype(np.float32),
            rng.uniform(-1, 1, (n, 2)).astype(np.float32),
            rng.standard_normal(n).astype(np.float32),
            rng.standard_normal((n, 5)).astype(np.float32),
            np.where(rng.random(n) < 0.2, 0.0, 0.99).astype(np.float32),
        )
        weights = rng.random(n).astype(np.float32) if prioritized else None
        a, td_a = plain.update(batch, weights)
        b, td_b = fast.update(batch, weights)
        torch.testing.assert_close(td_a, td_b, rtol=1e-4, atol=1e-4)
        for key in a:
            torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-4)
    for p, f in (
        (plain.actor_optimizer, fast.actor_optimizer),
        (plain.critic_optimizer, fast.critic_optimizer),
    ):
        torch.testing.assert_close(p.flat, f.flat, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(plain.target_flat, fast.target_flat, rtol=1e-4, atol=1e-5)
    assert fast.critic_optimizer.steps == 8
