"""`pararl bench dqn`: DQN end to end, in three parts (each selectable with --parts).

1. `solve`: time to solve CartPole-v1, whole processes from launch to exit: `pararl
   train dqn --mode {serial,sync,async}` and `--mode averaging --workers 2` against
   Stable-Baselines3 DQN with the rl-baselines3-zoo settings, one run per system and
   seed, interleaved by seed.
2. `throughput`: transitions/s of the seed post's design (a network pickled through
   a pipe per step, one transition per message) against pararl async with the same
   number of actor processes.
3. `overlap`: pararl async's actors alone, learner alone, and both together.

Writes `dqn.json`, a PNG and (full mode) the bench:dqn section of BENCHMARKS.md.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Literal

from pararl.bench.common import (
    command_line,
    cores_text,
    progress,
    relative_link,
    replace_section,
    repo_root,
    run_metadata,
    write_json,
)
from pararl.bench.dqn_pararl import Workload, workload_config
from pararl.bench.dqn_report import (
    key_ratios,
    markdown_section,
    overlap_table,
    plot,
    solve_tables,
    throughput_table,
)
from pararl.bench.dqn_solve import ALL_SYSTEMS, SolveSettings, System, measure_solve, solve_summary
from pararl.bench.dqn_throughput import Timing, measure_overlap, measure_throughput
from pararl.bench.publish import OutputOptions, SolveOptions
from pararl.errors import UsageError
from pararl.runners.dqn_async import default_actors

PROG = "pararl bench dqn"
SECTION = "dqn"
Part = Literal["solve", "throughput", "overlap"]


@dataclass(frozen=True)
class DQNBenchConfig(SolveOptions, OutputOptions):
    """DQN: time to solve CartPole against SB3, transitions/s against the seed's design,
    and the overlap of acting and learning.

    Never run two benchmarks at once. --quick sets the options left at their defaults
    to a tiny run (1-2 min) and writes only into --out-dir (BENCHMARKS.md stays as it
    is unless --update-benchmarks True).
    """

    quick: bool = False
    """Fast check of the harness: 1 seed, 1,200-step budget, short spells; no claims."""

    parts: tuple[Part, ...] = ("solve", "throughput", "overlap")
    """Parts to run."""

    systems: tuple[System, ...] = ALL_SYSTEMS
    """solve: systems to time."""

    actors: tuple[int, ...] = (1, 2)
    """throughput: actor process counts (the seed's children, pararl's actors)."""

    workloads: tuple[Workload, ...] = ("seed", "defaults")
    """throughput: pararl configs; `seed`: the seed's net, batch, lr, gamma and update
    rate on pararl's machinery; `defaults`: pararl's DQN defaults."""

    overlap_actors: int | None = None
    """overlap: actor processes (default: what `pararl train` uses, cores - 1)."""

    overlap_workload: Workload = "defaults"
    """overlap: pararl config of the learner and actors."""

    repeats: int = 3
    """throughput/overlap: timed spells per system, interleaved."""

    block_s: float = 3.0
    """throughput/overlap: seconds per timed spell."""

    warmup_s: float = 1.0
    """throughput/overlap: untimed seconds before each spell."""

    learner_threads: int | None = None
    """throughput/overlap: torch threads of this (learner) process; default: what
    `pararl train` chooses for the model (`set_learner_threads`)."""

    seed: int = 0
    """throughput/overlap: seed of the envs, nets and replay sampling."""


QUICK: dict[str, Any] = {
    "seeds": (0,),
    "budget": 1_200,
    "eval_every": 600,
    "eval_episodes": 5,
    "verify_episodes": 5,
    "run_timeout_s": 120.0,
    "workloads": ("seed",),
    "repeats": 2,
    "block_s": 0.6,
    "warmup_s": 0.3,
}


def resolve(config: DQNBenchConfig) -> DQNBenchConfig:
    """Apply --quick to the options left at their defaults, then check every value."""
    if config.quick:
        defaults = DQNBenchConfig()
        changes = {k: v for k, v in QUICK.items() if getattr(config, k) == getattr(defaults, k)}
        config = dataclasses.replace(config, **changes)
    problems = [
        (not config.parts, "--parts needs at least one of solve, throughput, overlap"),
        ("solve" in config.parts and not config.seeds, "--seeds needs at least one seed"),
        ("solve" in config.parts and not config.systems, "--systems needs at least one"),
        (config.budget < 1, "--budget must be >= 1"),
        (config.eval_every < 1, "--eval-every must be >= 1"),
        (config.eval_episodes < 1 or config.verify_episodes < 1, "episodes must be >= 1"),
        (not config.run_timeout_s > 0, "--run-timeout-s must be > 0"),
        (not config.actors or min(config.actors) < 1, "--actors needs values >= 1"),
        ("throughput" in config.parts and not config.workloads, "--workloads needs one"),
        (config.overlap_actors is not None and config.overlap_actors < 1, "--overlap-actors >= 1"),
        (config.repeats < 1, "--repeats must be >= 1 (3 or more for results worth keeping)"),
        (not config.block_s > 0, "--block-s must be > 0"),
        (config.warmup_s < 0, "--warmup-s must be >= 0"),
        (config.learner_threads is not None and config.learner_threads < 1, "threads >= 1"),
    ]
    for bad, message in problems:
        if bad:
            raise UsageError(message)
    return config


def measure(config: DQNBenchConfig) -> dict[str, Any]:
    """Run the selected parts; JSON-ready results keyed by part."""
    results: dict[str, Any] = {}
    timing = Timing(config.repeats, config.block_s, config.warmup_s, config.learner_threads)
    if "solve" in config.parts:
        settings = SolveSettings(
            config.budget,
            config.target,
            config.eval_every,
            config.eval_episodes,
            config.verify_episodes,
            config.run_timeout_s,
        )
        runs = measure_solve(config.systems, config.seeds, settings)
        results["solve"] = {
            "settings": dataclasses.asdict(settings),
            **solve_summary(runs, config.systems),
        }
    if "throughput" in config.parts:
        results["throughput_timing"] = dataclasses.asdict(timing)
        results["throughput"] = measure_throughput(
            sorted(set(config.actors)), config.workloads, timing, config.seed
        )
    if "overlap" in config.parts:
        actors = config.overlap_actors or default_actors(workload_config(config.overlap_workload))
        results["overlap"] = measure_overlap(config.overlap_workload, actors, timing, config.seed)
    return results


def run(config: DQNBenchConfig) -> dict[str, Any]:
    """Measure, print the tables, write JSON, PNG and (full mode) BENCHMARKS.md."""
    import torch

    command = command_line(PROG, config)
    config = resolve(config)
    root = repo_root()
    out_dir = config.out_dir or root / "bench_results"
    figure = config.figure or (
        out_dir / "bench_dqn.png" if config.quick else root / "figures" / "bench_dqn.png"
    )
    benchmarks_md = config.benchmarks_md or root / "BENCHMARKS.md"
    update = (not config.quick) if config.update_benchmarks is None else config.update_benchmarks
    meta = run_metadata(dataclasses.asdict(config), command)

    start = time.perf_counter()
    threads = torch.get_num_threads()
    try:
        if config.learner_threads is not None:
            torch.set_num_threads(config.learner_threads)
        meta["torch_threads"] = torch.get_num_threads()
        data: dict[str, Any] = {"benchmark": SECTION, "metadata": meta, **measure(config)}
    finally:
        torch.set_num_threads(threads)  # a caller in the same process keeps its setting
    meta["wall_s"] = round(time.perf_counter() - start, 1)
    data["key_ratios"] = key_ratios(data)

    tables = []
    if "solve" in data:
        tables.append(solve_tables(data["solve"]))
    if "throughput" in data:
        tables.append(throughput_table(data["throughput"], data["throughput_timing"]))
    if "overlap" in data:
        tables.append(overlap_table(data["overlap"]))
    written = plot(data, figure)
    data["figure"] = None if written is None else str(written)
    json_path = write_json(out_dir / "dqn.json", data)
    print(
        f"## {PROG}: {meta['date']}, commit {meta['git_commit'] or 'unknown'}, "
        f"cores {cores_text(meta)}, {meta['wall_s']} s\n"
    )
    print("\n\n".join(tables))
    print(f"\nKey ratios: {data['key_ratios']}.\n")
    print(f"wrote {json_path}" + (f" and {written}" if written else ""))
    if update:
        link = None if written is None else relative_link(written, benchmarks_md.parent)
        replace_section(benchmarks_md, SECTION, markdown_section(data, tables, link))
        print(f"updated {benchmarks_md} (section bench:{SECTION})")
    progress(f"{PROG}: done in {meta['wall_s']} s")
    return data
