"""`pararl bench partial`: seeds/001's question — wait for every worker, or take
whatever has finished (timeout / min_envs)? — on the multi-task sampler.

For every envs-per-worker value one `MultiTaskSampler` per policy size is built
(N workers × M envs of `pararl/HalfCheetahDir-v0`, one task per env as in the
seed), and every recv policy samples the same tasks and seeds: one untimed
warm-up sample each, then timed samples in rounds of one sample per policy, the
order rotated every round, so slow drifts of the machine hit every policy alike.
Cheap cases get more rounds: as many as fit in `case_seconds` (judged from the
warm-up), at least `repeats`, at most `max_repeats`. `auto` is one object for the
whole case, as in training, where one sampler samples again and again: what it
measured in its warm-up sample carries over.
A sample runs one episode of L steps per env (L = `episode_length`, cut so that a
sample is at most `max_steps_per_sample` env steps), so an *iteration* is one step
of every env: time per iteration = sample wall time / L. Per case it reports the
median time per iteration with its spread ((max - min) / median), mean workers per
recv, forward passes per iteration, worker step-time mean and CV (measured by
`auto` in its wait-for-all rounds), and `auto`'s ratio to the best fixed policy.
Memory per env = RSS of the workers / envs.

The main process runs torch with one thread: the workers hold the cores.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil
import torch

from pararl.bench import partial_report
from pararl.bench.common import command_line, progress, run_metadata, summarize
from pararl.bench.publish import OutputOptions, apply_quick, check, outputs, publish
from pararl.samplers.auto import Auto
from pararl.samplers.multitask import MultiTaskSampler, make_task_env
from pararl.samplers.policies import MLPGaussianPolicy
from pararl.samplers.recv import parse_recv
from pararl.vector import physical_cores

PROG = "pararl bench partial"
SECTION = "partial"


@dataclass(frozen=True)
class PartialBenchConfig(OutputOptions):
    """Wait-for-all vs timeout vs min_envs vs auto recv, over envs per worker and
    policy size (seeds/001). Never run two benchmarks at once.

    --quick sets the options left at their defaults to a tiny run on Navigation2D
    (< 1 min) and writes only into --out-dir.
    """

    quick: bool = False
    """Fast check of the harness: Navigation2D, 2 sizes, 1 repeat; no claims."""

    env: str = "pararl/HalfCheetahDir-v0"
    """Task env id (needs sample_tasks and reset_task)."""

    workers: int | None = None
    """Worker processes; default: the physical cores available to this process."""

    envs_per_worker: tuple[int, ...] = (4, 20, 100, 500, 2000, 4000)
    """Sweep of envs per worker (the seed ran 20 and 4000 with 8 workers)."""

    skip: tuple[str, ...] = ("512,512@4000",)
    """Cases left out, as HIDDEN@ENVS_PER_WORKER (the default keeps the full run ~10 min)."""

    episode_length: int = 100
    """Steps per episode (one episode per env per sample), before the cap below."""

    max_steps_per_sample: int = 50_000
    """Cap on env steps per sample: large cases run shorter episodes (>= 10 steps)."""

    recv: tuple[str, ...] = (
        "all",
        "timeout=0.0001",
        "timeout=0.001",
        "timeout=0.01",
        "timeout=0.1",
        "min_envs=0.5",
        "auto",
    )
    """Recv policies: all, timeout=SECONDS, min_envs=K (a fraction of envs if < 1), auto."""

    hidden: tuple[str, ...] = ("64,64", "512,512")
    """Policy sizes (hidden widths, comma separated): small vs wide (forward grows with batch)."""

    repeats: int = 4
    """Least timed samples per recv policy and case, interleaved across policies."""

    max_repeats: int = 15
    """Most timed samples per recv policy and case (for cheap cases)."""

    case_seconds: float = 20.0
    """Timed seconds a case may take: cheap cases run more repeats, up to --max-repeats."""

    seed: int = 0
    """Seed of the tasks, env resets and action noise (the same for every policy)."""


QUICK: dict[str, Any] = {
    "env": "pararl/Navigation2D-v0",
    "envs_per_worker": (4, 64),
    "episode_length": 50,
    "hidden": ("64,64", "256,256"),
    "repeats": 1,
    "max_repeats": 2,
    "case_seconds": 1.0,
}


def parse_hidden(text: str) -> tuple[int, ...]:
    try:
        widths = tuple(int(w) for w in text.split(","))
    except ValueError:
        widths = ()
    if not widths or min(widths) < 1:
        from pararl.errors import UsageError

        raise UsageError(f"--hidden {text!r}: use comma-separated widths >= 1, e.g. 64,64")
    return widths


def resolve(config: PartialBenchConfig) -> PartialBenchConfig:
    """Apply --quick to the options left at their defaults, then check every value."""
    if config.quick:
        config = apply_quick(config, QUICK)
    config = dataclasses.replace(config, envs_per_worker=tuple(sorted(set(config.envs_per_worker))))
    check(
        [
            (config.workers is not None and config.workers < 1, "--workers must be >= 1"),
            (
                not config.envs_per_worker or min(config.envs_per_worker) < 1,
                "--envs-per-worker needs values >= 1",
            ),
            (config.episode_length < 1, "--episode-length must be >= 1"),
            (config.max_steps_per_sample < 1, "--max-steps-per-sample must be >= 1"),
            (not config.recv, "--recv needs at least one policy"),
            (not config.hidden, "--hidden needs at least one size"),
            (config.repeats < 1, "--repeats must be >= 1"),
            (config.max_repeats < config.repeats, "--max-repeats must be >= --repeats"),
            (config.case_seconds < 0, "--case-seconds must be >= 0"),
        ]
    )
    for spec in config.recv:
        parse_recv(spec)  # UsageError for a bad one, before anything starts
    for text in config.hidden:
        parse_hidden(text)
    for case in config.skip:
        hidden, at, epw = case.partition("@")
        check(
            [(not at or not epw.isdigit(), f"--skip {case!r}: use HIDDEN@ENVS, e.g. 512,512@4000")]
        )
        parse_hidden(hidden)
    return config


def cases(config: PartialBenchConfig) -> list[tuple[tuple[int, ...], int]]:
    """(hidden widths, envs per worker) of every case run, in order."""
    skip = {(parse_hidden(h), int(e)) for h, _, e in (c.partition("@") for c in config.skip)}
    return [
        (parse_hidden(h), epw)
        for h in config.hidden
        for epw in config.envs_per_worker
        if (parse_hidden(h), epw) not in skip
    ]


def rotated(tasks: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Rounds of one call per task, each round starting one task later than the last."""
    names = list(tasks)
    results: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            results[name].append(tasks[name]())
    return results


MAX_AUTO_WARMUP = 8  # extra warm-up samples allowed for auto to settle


def repeats_for(config: PartialBenchConfig, warmup_s: float) -> int:
    """More rounds for cheap cases: as many as fit in --case-seconds, within bounds."""
    fit = int(config.case_seconds / warmup_s) if warmup_s > 0 else config.max_repeats
    return max(config.repeats, min(config.max_repeats, fit))


def settle(auto: Auto, sample: Callable[[], float]) -> int:
    """Run more warm-up samples while `auto` is still deciding (its trial can span
    several samples of a large case), at most `MAX_AUTO_WARMUP`; the timed samples
    then show the mode it runs in for the rest of a training run. Returns how many
    warm-up samples it took in all."""
    extra = 0
    while auto.deciding and extra < MAX_AUTO_WARMUP:
        sample()
        extra += 1
    return 1 + extra


def episode_length(config: PartialBenchConfig, num_envs: int) -> int:
    return max(10, min(config.episode_length, config.max_steps_per_sample // num_envs))


def worker_rss_per_env(sampler: MultiTaskSampler) -> float | None:
    pids = getattr(sampler.venv, "worker_pids", [])
    if not pids:
        return None
    rss = sum(psutil.Process(pid).memory_info().rss for pid in pids)
    return rss / sampler.num_envs


def measure_sampler(
    config: PartialBenchConfig, workers: int, epw: int, hidden: tuple[int, ...]
) -> dict[str, Any]:
    """Every recv policy on one sampler; returns the case's results."""
    num_envs = workers * epw
    length = episode_length(config, num_envs)
    where = f"{epw} envs/worker × {workers}, hidden {hidden}, L={length}"
    progress(f"{where}: starting ...")
    probe = make_task_env(config.env, length, {})
    obs_dim = int(np.prod(probe.observation_space.shape or ()))
    act_dim = int(np.prod(probe.action_space.shape or ()))
    probe.close()
    policy = MLPGaussianPolicy(obs_dim, act_dim, hidden, seed=config.seed)
    sampler = MultiTaskSampler(
        config.env,
        policy,
        num_workers=workers,
        envs_per_worker=epw,
        episode_length=length,
        worker_timeout=120.0,
    )
    try:
        tasks = sampler.sample_tasks(num_envs, seed=config.seed)
        stats: dict[str, list[dict[str, Any]]] = {name: [] for name in config.recv}
        autos: dict[str, Auto] = {}

        def one(name: str) -> float:
            sampler.recv_policy = autos[name] if name in autos else parse_recv(name)
            result = sampler.sample(tasks, 1, seed=config.seed)
            stats[name].append(result.stats.as_dict())
            return result.stats.wall_s / length

        warm = time.perf_counter()
        for name in config.recv:  # warm-up; auto keeps its measurements across samples
            recv = parse_recv(name)
            if isinstance(recv, Auto):
                autos[name] = recv
            one(name)
            stats[name].clear()
        repeats = repeats_for(config, time.perf_counter() - warm)
        warmups = {name: settle(auto, functools.partial(one, name)) for name, auto in autos.items()}
        for name in autos:
            stats[name].clear()
        rss = worker_rss_per_env(sampler)
        samples = rotated({n: functools.partial(one, n) for n in config.recv}, repeats)
    finally:
        sampler.close()
    cells = {
        name: partial_report.cell(summarize(samples[name]), stats[name], length, autos.get(name))
        for name in config.recv
    }
    progress(f"{where}: done")
    return {
        "envs_per_worker": epw,
        "num_envs": num_envs,
        "hidden": list(hidden),
        "episode_length": length,
        "repeats": repeats,
        "rss_per_env_mb": None if rss is None else rss / 1e6,
        "policies": cells,
        "auto_warmup_samples": warmups,
    }


def run(config: PartialBenchConfig) -> None:
    command = command_line(PROG, config)
    config = resolve(config)
    workers = config.workers or physical_cores()
    outs = outputs(SECTION, config)
    meta = run_metadata({**dataclasses.asdict(config), "workers_resolved": workers}, command)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    start = time.perf_counter()
    try:
        results = [measure_sampler(config, workers, epw, h) for h, epw in cases(config)]
    finally:
        torch.set_num_threads(threads)
    meta["wall_s"] = round(time.perf_counter() - start, 1)
    data = {"benchmark": SECTION, "metadata": meta, "cases": results}
    data["key_ratios"] = partial_report.key_ratios(results)
    publish(
        PROG,
        SECTION,
        data,
        outs,
        partial_report.tables(results),
        partial_report.plot,
        partial_report.markdown_section,
    )
