"""pararl's PPO against Stable-Baselines3's, step by step, on MinAtar Space Invaders
(images, episodes ending inside rollouts): from the same weights, env seeds and
random draws, the rollouts (observations, actions, rewards, ends, log-probabilities,
values, GAE advantages and returns) are the same, in-process envs and worker
processes alike; and the training iterations (rollout, GAE, learning-rate schedule,
minibatch epochs) give the same weights, iteration after iteration. Any defect in
acting, autoreset, GAE, the loss or the optimizer shows up here as a first differing
step, long before it shows in a learning curve."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")
pytest.importorskip("minatar")

from benchmarks.lib.sb3 import minatar_ppo, silent
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from pararl.config import PPOConfig, env_kind
from pararl.envs.make import env_factory
from pararl.runners.ppo_state import PPOState
from pararl.samplers.rollout.collect import EnvStream, Rollout, collect
from pararl.vector import ParallelVectorEnv, SerialVectorEnv

ENV, ENVS, STEPS = "MinAtar/SpaceInvaders-v1", 8, 128


class _Quiet(BaseCallback):
    def _on_step(self) -> bool:
        return True


def _pair() -> tuple[Any, PPOState]:
    """SB3's PPO with pararl's MinAtar settings (value loss unclipped: SB3 clips the
    value alone, pararl takes the larger error), and pararl's state with SB3's
    initial weights."""
    envs = make_vec_env(env_factory(ENV, training=True), n_envs=ENVS, seed=0)
    model = PPO("MlpPolicy", envs, seed=0, device="cpu", **{**minatar_ppo(), "clip_range_vf": None})
    silent(model)
    cfg = PPOConfig(env=ENV, act_device="cpu", learn_device="cpu", clip_vloss=False)
    spaces = envs.observation_space, envs.action_space
    state = PPOState(cfg.for_env(env_kind(*spaces)), *spaces, ENVS)
    ours, theirs = state.learner.model, model.policy
    layers = [
        (ours.body.body[0][0], theirs.features_extractor.net[0]),  # the convolution
        (ours.body.body[2], theirs.features_extractor.net[3]),  # the hidden layer
        (ours.actor, theirs.action_net),
        (ours.critic, theirs.value_net),
    ]
    with torch.no_grad():
        for mine, sb3 in layers:
            mine.weight.copy_(sb3.weight)
            mine.bias.copy_(sb3.bias)
    return model, state


def test_initial_weights_are_sb3s() -> None:
    """The same initialisation, draw for draw: from one torch seed pararl's MinAtar
    network (orthogonal, gain sqrt 2 in the trunk, 0.01 on the policy head, 1 on the
    value head, zero biases) is SB3's, weight for weight (to float rounding: the two
    orthogonalise in differently ordered arithmetic)."""
    envs = make_vec_env(env_factory(ENV, training=True), n_envs=2, seed=0)
    spaces = envs.observation_space, envs.action_space
    cfg = PPOConfig(env=ENV, act_device="cpu", learn_device="cpu").for_env(env_kind(*spaces))
    for seed in (0, 1):
        model = PPO("MlpPolicy", envs, seed=seed, device="cpu", **minatar_ppo())
        torch.manual_seed(seed)
        ours = PPOState(cfg, *spaces, 2).learner.model
        theirs = [p for p in model.policy.parameters()]
        mine = [p for name, p in ours.named_parameters() if name != "log_std"]  # unused here
        assert [p.shape for p in mine] == [p.shape for p in theirs]
        for a, b in zip(mine, theirs, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def _flat(x: np.ndarray) -> np.ndarray:
    """SB3's [steps, envs] order flattened env by env (its `swap_and_flatten`)."""
    return x.swapaxes(0, 1).reshape(-1, *x.shape[2:])


def _by_step(x: np.ndarray) -> np.ndarray:
    """SB3's [steps, envs] flattened step by step, as pararl's rollout batch is."""
    return x.reshape(-1, *x.shape[2:])


@pytest.mark.parametrize("workers", [0, 2])
def test_rollouts_are_sb3s(workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.set_num_threads(1)
    model, state = _pair()
    model._setup_learn(10**6, None)
    callback = _Quiet()
    callback.init_callback(model)
    fns = [env_factory(ENV, training=True)] * ENVS
    envs = (
        ParallelVectorEnv(fns, num_workers=workers, autoreset_mode="SameStep")
        if workers
        else SerialVectorEnv(fns, autoreset_mode="SameStep")
    )
    raw: dict[str, np.ndarray] = {}
    finish = Rollout.finish

    def keep(self: Rollout, last_obs: np.ndarray) -> dict[str, np.ndarray]:
        raw.update(rewards=self.rewards.copy(), ends=self.terminated | self.truncated)
        return finish(self, last_obs)

    monkeypatch.setattr(Rollout, "finish", keep)
    try:
        stream = EnvStream.start(envs.reset(seed=list(range(ENVS)))[0], 0.99)
        assert np.array_equal(stream.obs, model._last_obs)
        ends = 0
        for k in range(2):  # the second starts where the first left off
            torch.manual_seed(k)  # the same action draws on both sides
            model.collect_rollouts(model.env, callback, model.rollout_buffer, STEPS)
            torch.manual_seed(k)
            batch = collect(state.actor, state.rollout_spec, envs, stream, lambda _: None)
            buf = model.rollout_buffer
            sb3_ends = np.concatenate([buf.episode_starts[1:], model._last_episode_starts[None]])
            np.testing.assert_array_equal(raw["ends"], sb3_ends.astype(bool))
            np.testing.assert_allclose(raw["rewards"], buf.rewards)
            np.testing.assert_array_equal(batch["obs"], _by_step(buf.observations).astype(bool))
            np.testing.assert_array_equal(batch["actions"], _by_step(buf.actions).reshape(-1))
            for ours, theirs in (
                ("logprobs", "log_probs"),
                ("values", "values"),
                ("advantages", "advantages"),
                ("returns", "returns"),
            ):
                theirs_flat = _by_step(getattr(buf, theirs)).reshape(-1)
                np.testing.assert_allclose(batch[ours], theirs_flat, atol=1e-5)
            ends += int(raw["ends"].sum())
        assert ends > 10  # episodes ended inside the rollouts (~40): autoreset was exercised
    finally:
        envs.close()


def test_training_iterations_are_sb3s() -> None:
    """Rollout, GAE, the learning-rate schedule and the minibatch epochs, iteration after
    iteration: pararl's train loop gives SB3's `learn` weights to float rounding. Both
    draw actions from torch's global stream and minibatch orders from numpy's (pararl's
    batch taken in SB3's env-major order, so that one permutation picks the same
    samples); pararl's learning rate set from the steps after the rollout, as SB3's."""
    torch.set_num_threads(1)
    model, state = _pair()
    budget = 100 * ENVS * STEPS
    model._setup_learn(budget, None)
    callback = _Quiet()
    callback.init_callback(model)
    envs = SerialVectorEnv([env_factory(ENV, training=True)] * ENVS, autoreset_mode="SameStep")

    class NumpyStream:  # pararl's minibatch order from numpy's global stream, as SB3's
        def permutation(self, n: int) -> np.ndarray:
            return np.random.permutation(n)

    def params(module: torch.nn.Module) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in module.parameters() if p.requires_grad])

    try:
        stream = EnvStream.start(envs.reset(seed=list(range(ENVS)))[0], 0.99)
        for k in range(2):  # the second starts where the first left off
            torch.manual_seed(k)
            np.random.seed(k)
            model.collect_rollouts(model.env, callback, model.rollout_buffer, STEPS)
            model._update_current_progress_remaining(model.num_timesteps, budget)
            model.train()
            torch.manual_seed(k)
            np.random.seed(k)
            batch = collect(state.actor, state.rollout_spec, envs, stream, lambda _: None)
            batch.pop("discounted")
            state.env_steps += ENVS * STEPS
            state.learner.set_lr_fraction(1 - state.env_steps / budget)
            env_major = {
                key: v.reshape(STEPS, ENVS, *v.shape[1:]).swapaxes(0, 1).reshape(v.shape)
                for key, v in batch.items()
            }
            state.learner.update(env_major, NumpyStream())  # type: ignore[arg-type]
            ours, theirs = params(state.learner.model), params(model.policy)
            torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
        assert state.learner.updates == 2 * 4 * 4  # iterations x epochs x minibatches
    finally:
        envs.close()
