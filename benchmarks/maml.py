"""`python -m benchmarks maml`: time per MAML-TRPO meta-iteration (sampling,
adaptation, outer step), pararl's multi-task sampler and Fisher-vector products against
the parallel-sampling post's design (`maml_seed`), alternating iterations.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.lib import harness as h
from benchmarks.lib.figures import Panel, grouped_bars

DESIGNS = ("pararl", "seed")
PARTS = ("sampling", "adaptation", "outer")


@dataclass(frozen=True)
class Config(h.Options):
    """MAML-TRPO meta-iteration time, pararl's sampler vs the sampling post's design, split into
    sampling / adaptation / outer step. --quick: Navigation2D, a small meta-batch."""

    envs: tuple[str, ...] = ("pararl/HalfCheetahDir-v0", "pararl/Navigation2D-v0")  # Task envs.
    workers: int = 2  # Env worker processes (both designs).
    meta_batch_size: int | None = None  # Tasks per meta-iteration (default: the reference's).
    fast_batch_size: int = 20  # Episodes per task per batch.
    episode_length: int = 100  # Steps per episode.
    iterations: int = 3  # Timed meta-iterations per design and env (after one warm-up each).


def resolve(config: Config) -> Config:
    quick = {"envs": ("pararl/Navigation2D-v0",), "meta_batch_size": 4, "fast_batch_size": 4,
             "episode_length": 20, "iterations": 1}  # fmt: skip
    c = h.apply_quick(config, quick)
    h.require(c, ">= 1: envs workers meta_batch_size fast_batch_size episode_length iterations")
    return c


@dataclass
class Row:
    """One sampler design on one env."""

    env: str
    design: str
    tasks: int
    episodes: int
    iteration: h.Summary  # seconds per meta-iteration
    sampling: h.Summary
    adaptation: h.Summary
    outer: h.Summary
    post_minus_pre: float  # mean over the timed iterations (a check that both learn alike)
    vs_seed: float | None = None  # this design's time per iteration / the post's


def measure_env(c: Config, env: str) -> list[Row]:
    """Both designs on `env`, alternating meta-iterations after a warm-up each (process
    start, auto's first decision); the reference's outer step takes one task at a time
    with autograd's Fisher-vector products."""
    import torch

    from benchmarks.maml_seed import SeedSampler
    from pararl.algos.maml import check_spaces
    from pararl.config import MAMLConfig
    from pararl.envs.make import probe_env
    from pararl.mp.topology import physical_cores
    from pararl.runners.maml import MAMLState, layout, meta_iteration
    from pararl.samplers.meta.sampler import MultiTaskSampler

    asked = MAMLConfig(env=env, meta_batch_size=c.meta_batch_size,
                       fast_batch_size=c.fast_batch_size, episode_length=c.episode_length, seed=0,
                       device="cpu")  # fmt: skip
    cfg: Any = asked.for_env("continuous").config  # every field set
    obs_space, act_space = probe_env(env)
    check_spaces(cfg, obs_space, act_space)
    obs_dim, act_dim = (int(np.prod(s.shape or ())) for s in (obs_space, act_space))
    states: dict[str, Any] = {}
    for design in DESIGNS:
        torch.manual_seed(0)  # the same initial meta-policy for both
        states[design] = MAMLState(cfg, obs_dim, act_dim, None)
        states[design].learner.threads = physical_cores()  # as `pararl train maml` does
    states["seed"].learner.fisher = "autograd"
    states["seed"].learner.task_chunk = 1
    stats: dict[str, list[dict[str, float]]] = {d: [] for d in DESIGNS}
    common: dict[str, Any] = {"num_workers": c.workers, "episode_length": cfg.episode_length}
    opened: dict[str, Any] = {
        "pararl": MultiTaskSampler(cfg.env, states["pararl"].acting, recv="auto",
                                   envs_per_worker=layout(cfg, c.workers), worker_timeout=120.0,
                                   **common),
        "seed": SeedSampler(cfg.env, states["seed"].acting, **common,
                            num_envs=cfg.meta_batch_size * cfg.fast_batch_size),
    }  # fmt: skip
    try:

        def one(design: str) -> float:
            h.progress(f"{env}: {design}, meta-iteration {states[design].iteration + 1}")
            row, _ = meta_iteration(states[design], opened[design])
            stats[design].append(row)
            return sum(row[f"time_{p}_s"] for p in PARTS)

        for design in DESIGNS:
            one(design)
            stats[design].clear()
        tasks = {d: functools.partial(one, d) for d in DESIGNS}
        times = h.interleaved(tasks, c.iterations, rotate=True)
    finally:
        for sampler in opened.values():
            sampler.close()
    rows = []
    for design in DESIGNS:
        st = stats[design]
        sampling, adaptation, outer = (h.summarize([s[f"time_{p}_s"] for s in st]) for p in PARTS)
        gap = float(np.mean([s["post_return"] - s["pre_return"] for s in st]))
        rows.append(Row(env, design, cfg.meta_batch_size, cfg.fast_batch_size,
                        h.summarize(times[design]), sampling, adaptation, outer, gap))  # fmt: skip
    for r in rows:
        r.vs_seed = h.ratio(r.iteration, rows[-1].iteration)
    return rows


def measure(c: Config, meta: h.Metadata) -> list[Row]:
    import torch

    torch.set_num_threads(1)
    return [row for env in c.envs for row in measure_env(c, env)]


def ms(s: h.Summary) -> str:
    return h.fmt_spread(s, lambda v: f"{v:.2f}")


COLUMNS: list[h.Col[Row]] = [
    h.Col("env", lambda r: r.env, "l"),
    h.Col("sampler", lambda r: r.design, "l"),
    h.Col("tasks × episodes", lambda r: f"{r.tasks} × {r.episodes}"),
    h.Col("s / meta-iteration: median (min–max)", lambda r: ms(r.iteration)),
    h.Col("sampling s", lambda r: ms(r.sampling)),
    h.Col("adaptation s", lambda r: ms(r.adaptation)),
    h.Col("outer step s", lambda r: ms(r.outer)),
    h.Col("vs seed", lambda r: h.fmt_ratio(r.vs_seed)),
    h.Col("post − pre return", lambda r: f"{r.post_minus_pre:.1f}"),
]


def report(rows: list[Row], meta: h.Metadata) -> h.Report:
    envs = list(dict.fromkeys(r.env for r in rows))
    by = {(r.env, r.design): r for r in rows}
    ratios = []
    for env in envs:
        mine, seed = by[(env, "pararl")], by[(env, "seed")]
        whole = h.fmt_ratio(h.ratio(seed.iteration, mine.iteration))
        sampling = h.fmt_ratio(h.ratio(seed.sampling, mine.sampling))
        outer = h.fmt_ratio(h.ratio(seed.outer, mine.outer))
        ratios.append(
            f"{env}: seed / pararl per meta-iteration {whole}, sampling alone {sampling}, "
            f"outer step alone {outer}"
        )
    panels = []
    for env in envs:
        named = {design: [getattr(by[(env, design)], p) for p in PARTS] for design in DESIGNS}
        series, _ = grouped_bars(named)
        panels.append(
            Panel(
                env,
                series,
                ylabel="seconds per meta-iteration",
                xticks=[(i, p) for i, p in enumerate(PARTS)],
            )
        )
    return h.Report(
        "MAML-TRPO meta-iteration: pararl's sampler vs the sampling post's design "
        f"(`{h.PROG} maml`)",
        "; ".join(ratios),
        [h.table(COLUMNS, rows)],
        panels,
        "MAML meta-iteration time split",
    )
