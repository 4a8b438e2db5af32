"""`python -m benchmarks ppo`: PPO end to end, in two parts (--parts).

1. `solve`: time to solve CartPole-v1, `pararl train ppo` with its defaults against
   SB3 PPO with the rl-baselines3-zoo settings (a row of `lib.compare`).
2. `double_buffer`: env steps/s of rollout collection alone, `samplers.rollout.collect`
   against `collect_double` (while one group of workers steps, this process acts for
   the other), for a cheap and an expensive policy, on one `ParallelVectorEnv` per env;
   with the forward and env-step times that bound what overlapping can hide.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from benchmarks.lib import compare
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Outcome, System
from benchmarks.lib.figures import Panel, grouped_bars

STEP_COST = "pararl/StepCost-v0"
SOLVE = compare.solve_cartpole("ppo", (
    System("pararl", "pararl PPO (defaults)", "ppo"),
    System("pararl-serial", "pararl PPO serial", "ppo", {"mode": "serial"}, default=False),
    System("pararl-sync", "pararl PPO sync", "ppo", {"mode": "sync"}, default=False),
), budget=100_000, quick=2_048)  # fmt: skip


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """PPO: time to solve CartPole against SB3 PPO (zoo settings), and the sampling
    throughput of double-buffered collection. --quick: 1 seed, 2,048-step budget, short
    spells (< 1 min)."""

    parts: tuple[Literal["solve", "double_buffer"], ...] = ("solve", "double_buffer")
    """Parts to run."""
    envs: tuple[str, ...] = ("CartPole-v1", STEP_COST)
    """double_buffer: env ids."""
    step_cost_us: float = 50.0
    """double_buffer: CPU microseconds per step of pararl/StepCost-v0."""
    cheap_hidden: tuple[int, ...] = (64, 64)
    """double_buffer: hidden widths of the cheap policy."""
    expensive_hidden: tuple[int, ...] = (2048, 2048)
    """double_buffer: hidden widths of the expensive policy (forward ≈ env step or more)."""
    workers: int = 2
    """double_buffer: env worker processes (double-buffering needs at least 2)."""
    envs_per_worker: int = 16
    """double_buffer: envs each worker steps."""
    num_steps: int = 32
    """double_buffer: steps per env in each rollout (pararl's default)."""
    rollouts: int = 4
    """double_buffer: timed rollouts per spell."""
    warmup_rollouts: int = 1
    """double_buffer: untimed rollouts before each spell."""
    repeats: int = 3
    """double_buffer: timed spells per collector, interleaved."""
    act_device: Literal["cpu", "cuda"] = "cpu"
    """double_buffer: device of the policy forward."""
    seed: int = 0
    """double_buffer: seed of the envs and nets."""


QUICK = {
    "num_steps": 8,
    "rollouts": 2,
    "repeats": 2,
}


def resolve(config: Config) -> Config:
    c = h.apply_quick(compare.resolve(SOLVE, config), QUICK)
    h.require(c, ">= 0: parts step_cost_us warmup_rollouts", ">= 2: workers")
    h.require(c, ">= 1: cheap_hidden expensive_hidden envs_per_worker num_steps rollouts repeats")
    if "double_buffer" in c.parts:
        h.require(c, ">= 0: envs")
        if c.act_device == "cuda":
            import torch

            h.check([(not torch.cuda.is_available(), "--act-device cuda: CUDA is not available")])
    return c


@dataclass
class SamplingRow:
    """One (env, policy): both collectors' env steps/s, and what there is to overlap."""

    env: str
    hidden: tuple[int, ...]
    num_params: int
    forward_full_ms: float
    forward_group_ms: float
    env_step_ms: float
    plain: h.Summary | None = None
    double: h.Summary | None = None
    double_over_plain: float | None = None
    note: str = ""


@dataclass
class Results:
    solve: Outcome | None = None
    sampling: list[SamplingRow] = field(default_factory=list)


def make_env(env_id: str, step_cost_us: float) -> gym.Env:
    """pararl's env factory, except that StepCost gets its per-step cost (module level:
    it pickles to the workers)."""
    from pararl.envs.make import make_env as pararl_env

    if env_id != STEP_COST:
        return pararl_env(env_id)
    return gym.wrappers.RecordEpisodeStatistics(gym.make(STEP_COST, cost_us=step_cost_us))


def ignore(episode_infos: dict[str, Any]) -> None:
    """The episode sink while timing: only the collection is timed."""


def sampling_case(env_id: str, hidden: tuple[int, ...], envs: Any, c: Config) -> SamplingRow:
    """Both collectors on one (env, policy), interleaved, continuing one env stream."""
    import torch

    from pararl.algos.ppo import PPOState
    from pararl.config import PPOConfig
    from pararl.devices import time_forward
    from pararl.models import num_params
    from pararl.mp.threads import set_learner_threads
    from pararl.samplers.rollout.collect import EnvStream, collect, collect_double
    from pararl.seeding import seed_everything

    cfg = PPOConfig(
        env=env_id,
        seed=c.seed,
        hidden=hidden,
        num_steps=c.num_steps,
        workers=c.workers,
        envs_per_worker=c.envs_per_worker,
        act_device=c.act_device,
        learn_device=c.act_device,
        mode="sync",
        tensorboard=False,
    )
    seed_everything(c.seed)
    spaces = envs.single_observation_space, envs.single_action_space
    state = PPOState(cfg.for_spaces(*spaces), *spaces, envs.num_envs)
    set_learner_threads(num_params(state.learner.model), c.workers)  # as training sets them
    obs_dim, device, n = int(np.prod(state.obs_shape)), torch.device(c.act_device), envs.num_envs
    full = time_forward(state.actor, obs_dim, n, device)
    group = time_forward(state.actor, obs_dim, max(1, n // 2), device)
    envs.step(envs.action_space.sample())
    step_s, _ = h.timed(lambda: [envs.step(envs.action_space.sample()) for _ in range(c.num_steps)])
    # the timing stepped them: start afresh
    stream = EnvStream.start(envs.reset(seed=c.seed)[0], state.rollout_spec.gamma)
    row = SamplingRow(
        env_id, hidden, num_params(state.actor), 1e3 * full, 1e3 * group, 1e3 * step_s / c.num_steps
    )

    def spell(collect: Any) -> float:
        for i in range(c.warmup_rollouts + c.rollouts):
            if i == c.warmup_rollouts:
                start = time.perf_counter()
            collect(state.actor, state.rollout_spec, envs, stream, ignore)
        return c.rollouts * c.num_steps * n / (time.perf_counter() - start)

    def failed(name: str, exc: Exception) -> None:
        h.progress(f"double_buffer: {env_id} {hidden} {name} failed: {h.failure(exc)}")
        row.note += f"{name}: {h.failure(exc)}"

    tasks = {
        "plain": functools.partial(spell, collect),
        "double": functools.partial(spell, collect_double),
    }
    rates = h.interleaved(tasks, c.repeats, failed)
    row.plain, row.double = h.maybe(rates["plain"]), h.maybe(rates["double"])
    row.double_over_plain = h.ratio(row.double, row.plain)
    h.progress(
        f"double_buffer: {env_id} {hidden}: {h.fmt_spread(row.plain)} / {h.fmt_spread(row.double)}"
    )
    return row


def measure(c: Config, meta: h.Metadata) -> Results:
    from pararl.vector import ParallelVectorEnv

    out = Results()
    if "solve" in c.parts:
        out.solve = compare.measure(SOLVE, c, meta)
    for env_id in c.envs if "double_buffer" in c.parts else ():
        h.progress(f"double_buffer: {env_id}, {c.workers} workers × {c.envs_per_worker} envs ...")
        fn = functools.partial(make_env, env_id, c.step_cost_us)
        envs = ParallelVectorEnv(
            [fn] * (c.workers * c.envs_per_worker),
            num_workers=c.workers,
            autoreset_mode="SameStep",
        )
        try:
            envs.reset(seed=c.seed)
            out.sampling += [
                sampling_case(env_id, hid, envs, c) for hid in (c.cheap_hidden, c.expensive_hidden)
            ]
        finally:
            envs.close()
    return out


def policy(row: SamplingRow) -> str:
    return "x".join(map(str, row.hidden))


SAMPLING: list[h.Col[SamplingRow]] = [
    h.Col("env", lambda r: r.env, "l"),
    h.Col("policy", lambda r: f"{policy(r)} ({h.fmt_rate(r.num_params)} params)", "l"),
    h.Col(
        "forward ms, all / one group",
        lambda r: f"{r.forward_full_ms:.2f} / {r.forward_group_ms:.2f}",
    ),
    h.Col("env step ms", lambda r: f"{r.env_step_ms:.2f}"),
    h.Col("plain steps/s (min–max)", lambda r: h.fmt_spread(r.plain)),
    h.Col("double-buffered steps/s (min–max)", lambda r: h.fmt_spread(r.double)),
    h.Col("double ÷ plain", lambda r: h.fmt_ratio(r.double_over_plain)),
]


def report(r: Results, meta: h.Metadata) -> h.Report:
    p = meta.params
    blocks, panels, ratios = [], [], []
    if r.solve:
        text, solved, curves = compare.report(SOLVE, r.solve, SimpleNamespace(**p))
        blocks += solved
        panels += curves
        ratios.append(f"time to solve (target ≤ 0.5): {text}")
    if r.sampling:
        notes = (
            f"Env steps/s of rollout collection alone (no update): {p['workers']} workers × "
            f"{p['envs_per_worker']} envs, rollouts of {p['num_steps']} steps per env, acting on "
            f"{p['act_device']}; {p['repeats']} interleaved spells of {p['rollouts']} rollouts "
            f"after {p['warmup_rollouts']} untimed. pararl/StepCost-v0 burns "
            f"{p['step_cost_us']:g} µs of CPU per step. The forward and env-step columns (one "
            "policy forward; one vector step of the envs alone, random actions) say how much "
            "there is to overlap: double-buffering hides at most the shorter of a group's "
            "forward and a group's step, and only when a core is free for each."
        )
        notes += "".join(f" {row.env} {policy(row)}: {row.note}." for row in r.sampling if row.note)
        table = h.table(SAMPLING, r.sampling)
        blocks.append(f"### Sampling throughput: double-buffering off and on\n\n{notes}\n\n{table}")
        text = ", ".join(
            f"{row.env} {policy(row)} {h.fmt_ratio(row.double_over_plain)}" for row in r.sampling
        )
        ratios.append(f"double-buffered ÷ plain sampling: {text}")
        series, _ = grouped_bars(
            {
                "plain (all workers, then act)": [row.plain or "" for row in r.sampling],
                "double-buffered": [row.double or "" for row in r.sampling],
            }
        )
        series[0].notes = [h.fmt_ratio(row.double_over_plain) for row in r.sampling if row.plain]
        ticks = [
            (x, f"{row.env.split('/')[-1]}\n{policy(row)}") for x, row in enumerate(r.sampling)
        ]
        panels.append(
            Panel(
                "PPO sampling: double-buffering off / on",
                series,
                ylabel="env steps / s, collection only (median, min–max)",
                xticks=ticks,
                logy=True,
            )
        )
    return h.Report(
        f"PPO: time to solve against SB3, double-buffered sampling (`{h.PROG} ppo`)",
        "; ".join(ratios),
        blocks,
        panels,
        "PPO benchmark",
    )
