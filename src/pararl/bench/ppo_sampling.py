"""`pararl bench ppo`, part `double_buffer`: env steps/s of PPO rollout collection
alone (no learning), with double-buffering off and on.

For each env, one `ParallelVectorEnv` (workers × envs per worker, SAME_STEP autoreset,
as `pararl train ppo --mode sync` runs it) serves every policy and both collectors.
For each policy a `PPOState` puts the actor on the acting device, with torch threads
set as training sets them; then pararl's own collection functions run on those envs:
`runners.ppo.collect` (one batch for all envs, then wait for all workers) and the
double-buffered one (two groups of workers; while one group steps, this process
computes the other's actions), interleaved, `repeats` spells of `rollouts` rollouts
each after `warmup` untimed ones. A rollout includes what `collect` does besides
stepping (storing, GAE), as in training.

To judge how much overlap there is to gain, each case also times, once: the policy
forward at the full batch and at one group's (`devices.time_forward`), and one vector
step of the envs alone with random actions. Double-buffering can only hide the
shorter of "a group's forward" and "a group's env step" behind the longer, and only
when cores are free for both at once.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from pararl.bench.common import interleaved, progress, summarize

STEP_COST = "pararl/StepCost-v0"
SINGLE, DOUBLE = "single", "double"
DOUBLE_NAME = "collect_double"  # the double-buffered collector in pararl.runners.ppo

Collector = Callable[..., tuple[dict[str, np.ndarray], np.ndarray]]
Device = Literal["cpu", "cuda"]


@dataclass(frozen=True)
class SamplingSettings:
    envs: tuple[str, ...] = ("CartPole-v1", STEP_COST)
    policies: tuple[tuple[int, ...], ...] = ((64, 64), (2048, 2048))
    step_cost_us: float = 50.0  # pararl/StepCost-v0's CPU time per step
    workers: int = 2
    envs_per_worker: int = 16
    num_steps: int = 32  # steps per env in each rollout
    rollouts: int = 4  # timed rollouts per spell
    warmup: int = 1  # untimed rollouts before each spell
    repeats: int = 3
    act_device: Device = "cpu"
    seed: int = 0


@dataclass
class EnvStream:
    """A vector env and the observation its next rollout continues from (both
    collectors continue the same stream, as consecutive rollouts in training do)."""

    envs: Any
    obs: np.ndarray


def ignore_episodes(infos: dict[str, Any]) -> None:
    """The episode sink for timing: no bookkeeping, only the collection is timed."""
    del infos


def collectors() -> dict[str, Collector | None]:
    """pararl's two collection functions; None where this checkout has no
    double-buffered one (it is then reported as not available)."""
    from pararl.runners import ppo

    return {SINGLE: ppo.collect, DOUBLE: getattr(ppo, DOUBLE_NAME, None)}


def make_bench_env(env_id: str, step_cost_us: float) -> gym.Env:
    """pararl's env factory, except that StepCost gets its per-step cost (pararl's
    factory passes no env arguments). Module level: it pickles to the workers."""
    if env_id != STEP_COST:
        from pararl.envs.make import make_env

        return make_env(env_id)
    import pararl.envs  # noqa: F401 - registers the pararl/ ids

    return gym.wrappers.RecordEpisodeStatistics(gym.make(STEP_COST, cost_us=step_cost_us))


def open_envs(env_id: str, s: SamplingSettings) -> Any:
    from pararl.vector import ParallelVectorEnv

    fn = functools.partial(make_bench_env, env_id, s.step_cost_us)
    return ParallelVectorEnv(
        [fn] * (s.workers * s.envs_per_worker), s.workers, autoreset_mode="SameStep"
    )


def make_state(env_id: str, hidden: tuple[int, ...], envs: Any, s: SamplingSettings) -> Any:
    """A PPOState as `train_ppo` builds it, acting on `s.act_device`, with this
    process's torch threads set as training sets them."""
    from pararl.config import PPOConfig
    from pararl.models import num_params
    from pararl.runners.ppo import PPOState
    from pararl.runners.setup import seed_everything, set_learner_threads

    cfg = PPOConfig(
        env=env_id,
        seed=s.seed,
        hidden=hidden,
        num_steps=s.num_steps,
        workers=s.workers,
        envs_per_worker=s.envs_per_worker,
        act_device=s.act_device,
        learn_device=s.act_device,
        mode="sync",
        tensorboard=False,
    )
    seed_everything(s.seed)
    state = PPOState(cfg, envs.single_observation_space, envs.single_action_space, envs.num_envs)
    set_learner_threads(num_params(state.learner.model), s.workers)
    return state


def balance_ms(state: Any, envs: Any, s: SamplingSettings) -> dict[str, float]:
    """Forward at the full and a group's batch; a vector step of the envs alone."""
    import torch

    from pararl.devices import time_forward

    obs_dim = int(np.prod(state.obs_shape))
    device = torch.device(s.act_device)
    full = time_forward(state.actor, obs_dim, envs.num_envs, device)
    half = time_forward(state.actor, obs_dim, max(1, envs.num_envs // 2), device)
    envs.step(envs.action_space.sample())  # warm-up
    start = time.perf_counter()
    for _ in range(s.num_steps):
        envs.step(envs.action_space.sample())
    step = (time.perf_counter() - start) / s.num_steps
    return {
        "forward_full_ms": 1e3 * full,
        "forward_group_ms": 1e3 * half,
        "env_step_ms": 1e3 * step,
    }


def _spell(collect: Collector, state: Any, stream: EnvStream, s: SamplingSettings) -> float:
    """Env steps/s of `s.rollouts` rollouts after `s.warmup` untimed ones."""
    for _ in range(s.warmup):
        _, stream.obs = collect(state, stream.envs, stream.obs, ignore_episodes)
    start, steps = time.perf_counter(), state.env_steps
    for _ in range(s.rollouts):
        _, stream.obs = collect(state, stream.envs, stream.obs, ignore_episodes)
    return (state.env_steps - steps) / (time.perf_counter() - start)


def measure_case(
    env_id: str, hidden: tuple[int, ...], stream: EnvStream, s: SamplingSettings
) -> dict[str, Any]:
    """Both collectors on one (env, policy), interleaved; the ratio double ÷ single."""
    state = make_state(env_id, hidden, stream.envs, s)
    fns = collectors()
    variants: dict[str, dict[str, Any]] = {
        name: {"status": "ok", "note": "", "steps_per_s": None} for name in fns
    }
    tasks: dict[str, Callable[[], float]] = {}
    for name, fn in fns.items():
        if fn is None:
            variants[name]["status"] = "not available"
            variants[name]["note"] = f"pararl.runners.ppo has no {DOUBLE_NAME} in this checkout"
        else:
            tasks[name] = functools.partial(_spell, fn, state, stream, s)

    def failed(name: str, exc: Exception) -> None:
        progress(f"double_buffer: {env_id} {hidden} {name} failed: {type(exc).__name__}: {exc}")
        variants[name]["status"], variants[name]["note"] = "failed", f"{type(exc).__name__}: {exc}"

    balance = balance_ms(state, stream.envs, s)
    stream.obs, _ = stream.envs.reset(seed=s.seed)  # the timing stepped them: start afresh
    rates = interleaved(tasks, s.repeats, on_error=failed)
    for name, samples in rates.items():
        if samples and variants[name]["status"] == "ok":
            variants[name]["steps_per_s"] = summarize(samples).as_dict()
    single, double = (variants[k]["steps_per_s"] for k in (SINGLE, DOUBLE))
    ratio = None if single is None or double is None else double["median"] / single["median"]
    return {
        "env": env_id,
        "hidden": list(hidden),
        "num_params": sum(p.numel() for p in state.actor.parameters()),
        **{k: round(v, 4) for k, v in balance.items()},
        "variants": variants,
        "double_over_single": ratio,
    }


def measure_sampling(s: SamplingSettings) -> list[dict[str, Any]]:
    """Every (env, policy) case; each env's workers start once and serve all its cases."""
    cases: list[dict[str, Any]] = []
    for env_id in s.envs:
        progress(f"double_buffer: {env_id}, {s.workers} workers × {s.envs_per_worker} envs ...")
        envs = open_envs(env_id, s)
        try:
            stream = EnvStream(envs, envs.reset(seed=s.seed)[0])
            for hidden in s.policies:
                case = measure_case(env_id, tuple(hidden), stream, s)
                progress(f"double_buffer: {env_id} {tuple(hidden)}: {_brief(case)}")
                cases.append(case)
        finally:
            envs.close()
    return cases


def _brief(case: dict[str, Any]) -> str:
    parts = []
    for name, v in case["variants"].items():
        rate = v["steps_per_s"]
        parts.append(f"{name} {rate['median']:.0f}/s" if rate else f"{name} {v['status']}")
    return ", ".join(parts)
