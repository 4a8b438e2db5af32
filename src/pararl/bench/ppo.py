"""`pararl bench ppo`: PPO end to end, in two parts (each selectable with --parts).

1. `solve`: time to solve CartPole-v1, whole processes from launch to exit: `pararl
   train ppo` with its defaults against Stable-Baselines3 PPO with the
   rl-baselines3-zoo settings (`sb3_ppo`), one run per system and seed, interleaved
   by seed, each checked afterwards on 20 episodes (the DQN benchmark's harness,
   `dqn_solve`, with `algo="ppo"`).
2. `double_buffer`: env steps/s of rollout collection alone with double-buffering
   off and on, for a cheap and an expensive policy, on CartPole-v1 and
   pararl/StepCost-v0 (`ppo_sampling`).

Writes `ppo.json`, a PNG and (full mode) the bench:ppo section of BENCHMARKS.md.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Literal

from pararl.bench import ppo_report
from pararl.bench.common import command_line, progress, run_metadata
from pararl.bench.dqn_solve import SolveSettings, measure_solve, solve_summary
from pararl.bench.ppo_sampling import STEP_COST, SamplingSettings, measure_sampling
from pararl.bench.publish import OutputOptions, SolveOptions, apply_quick, check, outputs, publish

PROG = "pararl bench ppo"
SECTION = "ppo"
Part = Literal["solve", "double_buffer"]
PPOSystem = Literal["pararl", "pararl-serial", "pararl-sync", "sb3"]


@dataclass(frozen=True)
class PPOBenchConfig(SolveOptions, OutputOptions):
    """PPO: time to solve CartPole against SB3 PPO (zoo settings), and the sampling
    throughput of double-buffered collection.

    Never run two benchmarks at once. --quick sets the options left at their defaults
    to a tiny run (< 1 min) and writes only into --out-dir (BENCHMARKS.md stays as it
    is unless --update-benchmarks True).
    """

    quick: bool = False
    """Fast check of the harness: 1 seed, 2,048-step budget, short spells; no claims."""

    parts: tuple[Part, ...] = ("solve", "double_buffer")
    """Parts to run."""

    systems: tuple[PPOSystem, ...] = ("pararl", "sb3")
    """solve: systems to time; `pararl` is `pararl train ppo` with its defaults."""

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


QUICK: dict[str, Any] = {
    "seeds": (0,),
    "budget": 2_048,
    "eval_every": 1_024,
    "eval_episodes": 5,
    "verify_episodes": 5,
    "run_timeout_s": 120.0,
    "num_steps": 8,
    "rollouts": 2,
    "repeats": 2,
}


def resolve(config: PPOBenchConfig) -> PPOBenchConfig:
    """Apply --quick to the options left at their defaults, then check every value."""
    if config.quick:
        config = apply_quick(config, QUICK)
    solve, sample = "solve" in config.parts, "double_buffer" in config.parts
    hidden = config.cheap_hidden + config.expensive_hidden
    check(
        [
            (not config.parts, "--parts needs at least one of solve, double_buffer"),
            (solve and not config.seeds, "--seeds needs at least one seed"),
            (solve and not config.systems, "--systems needs at least one"),
            (config.budget < 1, "--budget must be >= 1"),
            (config.eval_every < 1, "--eval-every must be >= 1"),
            (config.eval_episodes < 1 or config.verify_episodes < 1, "episodes must be >= 1"),
            (not config.run_timeout_s > 0, "--run-timeout-s must be > 0"),
            (sample and not config.envs, "--envs needs at least one env id"),
            (config.step_cost_us < 0, "--step-cost-us must be >= 0"),
            (not hidden or min(hidden) < 1, "hidden widths must be >= 1"),
            (config.workers < 2, "--workers must be >= 2 (two groups to double-buffer)"),
            (config.envs_per_worker < 1, "--envs-per-worker must be >= 1"),
            (config.num_steps < 1 or config.rollouts < 1, "--num-steps, --rollouts >= 1"),
            (config.warmup_rollouts < 0, "--warmup-rollouts must be >= 0"),
            (config.repeats < 1, "--repeats must be >= 1 (3 or more for results worth keeping)"),
        ]
    )
    if sample and config.act_device == "cuda":
        import torch

        check([(not torch.cuda.is_available(), "--act-device cuda, but CUDA is not available")])
    return config


def sampling_settings(config: PPOBenchConfig) -> SamplingSettings:
    return SamplingSettings(
        envs=config.envs,
        policies=(config.cheap_hidden, config.expensive_hidden),
        step_cost_us=config.step_cost_us,
        workers=config.workers,
        envs_per_worker=config.envs_per_worker,
        num_steps=config.num_steps,
        rollouts=config.rollouts,
        warmup=config.warmup_rollouts,
        repeats=config.repeats,
        act_device=config.act_device,
        seed=config.seed,
    )


def measure(config: PPOBenchConfig) -> dict[str, Any]:
    """Run the selected parts; JSON-ready results keyed by part."""
    results: dict[str, Any] = {}
    if "solve" in config.parts:
        settings = SolveSettings(
            config.budget,
            config.target,
            config.eval_every,
            config.eval_episodes,
            config.verify_episodes,
            config.run_timeout_s,
            algo="ppo",
        )
        runs = measure_solve(config.systems, config.seeds, settings)
        results["solve"] = {
            "settings": dataclasses.asdict(settings),
            "labels": {k: ppo_report.SYSTEM_LABELS[k] for k in config.systems},
            **solve_summary(runs, config.systems),
        }
    if "double_buffer" in config.parts:
        s = sampling_settings(config)
        results["double_buffer_settings"] = dataclasses.asdict(s)
        results["double_buffer"] = measure_sampling(s)
    return results


def run(config: PPOBenchConfig) -> dict[str, Any]:
    """Measure, print the tables, write JSON, PNG and (full mode) BENCHMARKS.md."""
    import torch

    command = command_line(PROG, config)
    config = resolve(config)
    outs = outputs(SECTION, config)
    meta = run_metadata(dataclasses.asdict(config), command)
    start = time.perf_counter()
    threads = torch.get_num_threads()
    try:
        data: dict[str, Any] = {"benchmark": SECTION, "metadata": meta, **measure(config)}
    finally:
        torch.set_num_threads(threads)  # sampling set it as training would; restore
    meta["wall_s"] = round(time.perf_counter() - start, 1)
    data["key_ratios"] = ppo_report.key_ratios(data)
    publish(
        PROG,
        SECTION,
        data,
        outs,
        ppo_report.tables(data),
        ppo_report.plot,
        ppo_report.markdown_section,
    )
    progress(f"{PROG}: done in {meta['wall_s']} s")
    return data
