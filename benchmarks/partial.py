"""`python -m benchmarks partial`: wait for every worker, or take what has finished
(timeout, min_envs, auto)? Each recv policy on one `MultiTaskSampler` per case (policy
size, envs per worker), timed in rotated rounds.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.lib import harness as h
from benchmarks.lib.figures import Panel, Series
from pararl.mp.topology import physical_cores

MAX_AUTO_WARMUP = 8  # extra warm-up samples allowed for auto to settle
SKIP = {((512, 512), 4000)}  # cases left out (the full run stays ~10 min)
SEED_001 = [  # the parallel-sampling post's (8 workers, HalfCheetahDir, GPU policy)
    ["sampling post", "8 × 20 (160)", "timeout=0.0001 vs wait (0.1 s)", "wait as fast or faster"],
    ["sampling post", "8 × 4000 (32,000)", "timeout=0.0001 vs wait (0.1 s)",
     "314 s vs 342 s / 1000 it."],
]  # fmt: skip


@dataclass(frozen=True)
class Config(h.Options):
    """Wait-for-all vs timeout vs min_envs vs auto recv, over envs per worker and policy
    size (the parallel-sampling post). --quick: Navigation2D, 2 sizes, 1-2 repeats (< 1 min)."""

    env: str = "pararl/HalfCheetahDir-v0"  # Task env id (needs sample_tasks and reset_task).
    workers: int | None = None  # Worker processes (default: the physical cores here).
    envs_per_worker: tuple[int, ...] = (4, 20, 100, 500, 2000, 4000)  # The seed's: 20, 4000.
    episode_length: int = 100  # Steps per episode (at most 50,000 env steps a sample, >= 10).
    recv: tuple[str, ...] = ("all", "timeout=0.0001", "timeout=0.001", "timeout=0.01",
                             "timeout=0.1", "min_envs=0.5", "auto")  # fmt: skip
    """Recv policies: all, timeout=SECONDS, min_envs=K (a fraction of envs if < 1), auto."""
    hidden: tuple[str, ...] = ("64,64", "512,512")  # Policy sizes: hidden widths, comma separated.
    repeats: int = 4  # Least timed samples per recv policy and case, interleaved across policies.
    max_repeats: int = 15  # Most timed samples per recv policy and case (for cheap cases).
    case_seconds: float = 20.0  # Timed seconds of a case: cheap ones run more repeats.


def widths(text: str) -> tuple[int, ...]:
    try:
        out = tuple(int(w) for w in text.split(","))
    except ValueError:
        out = ()
    h.check([(min(out, default=0) < 1, f"--hidden {text!r}: use widths >= 1, e.g. 64,64")])
    return out


def resolve(config: Config) -> Config:
    from pararl.samplers.meta.sampler import parse_recv

    quick = {"env": "pararl/Navigation2D-v0", "envs_per_worker": (4, 64), "episode_length": 50,
             "hidden": ("64,64", "256,256"), "repeats": 1, "max_repeats": 2,
             "case_seconds": 1.0}  # fmt: skip
    c = h.apply_quick(config, quick)
    h.require(c, ">= 1: workers envs_per_worker episode_length repeats",
              ">= 0: recv hidden case_seconds")  # fmt: skip
    h.check([(c.max_repeats < c.repeats, "--max-repeats must be >= --repeats")])
    for spec in c.recv:
        parse_recv(spec)  # UsageError for a bad one, before anything starts
    for text in c.hidden:
        widths(text)
    return c


@dataclass
class Row:
    """One recv policy in one case."""

    hidden: tuple[int, ...]
    envs_per_worker: int
    num_envs: int
    episode_length: int
    recv: str
    per_iteration: h.Summary  # seconds
    workers_per_recv: float
    forwards_per_iteration: float
    forward_share: float
    step_mean_s: float | None = None  # from auto's wait-for-all rounds (same per case)
    step_cv: float | None = None
    rss_per_env_mb: float | None = None
    auto: str = ""  # what auto chose, on what
    vs_best_fixed: float | None = None
    best_fixed: bool = False

    @property
    def spread(self) -> float:
        t = self.per_iteration
        return (t.max - t.min) / t.median if t.median else 0.0


def measure_case(c: Config, workers: int, epw: int, hidden: tuple[int, ...]) -> list[Row]:
    """Every recv policy on one sampler; more warm-up while auto is still deciding, so
    that the timed samples show the mode it keeps for the run."""
    import psutil

    from pararl.envs.make import probe_env
    from pararl.models.gaussian import MLPGaussianPolicy
    from pararl.samplers.meta.auto import Auto
    from pararl.samplers.meta.sampler import MultiTaskSampler, parse_recv

    n = workers * epw
    length = max(10, min(c.episode_length, 50_000 // n))
    where = f"{epw} envs/worker × {workers}, hidden {hidden}, L={length}"
    h.progress(f"{where}: starting ...")
    obs_dim, act_dim = (int(np.prod(s.shape or ())) for s in probe_env(c.env))
    policy = MLPGaussianPolicy(obs_dim, act_dim, hidden, seed=0)
    sampler = MultiTaskSampler(c.env, policy, num_workers=workers, envs_per_worker=epw,
                               episode_length=length, worker_timeout=120.0)  # fmt: skip
    stats: dict[str, list[dict[str, Any]]] = {name: [] for name in c.recv}
    autos = {name: p for name in c.recv if isinstance(p := parse_recv(name), Auto)}
    warmups = dict.fromkeys(autos, 1)
    try:
        tasks = sampler.sample_tasks(n, seed=0)

        def one(name: str) -> float:
            sampler.recv_policy = autos.get(name) or parse_recv(name)
            result = sampler.sample(tasks, 1, seed=0)
            stats[name].append(result.stats.as_dict())
            return float(result.stats.wall_s / length)

        warm, _ = h.timed(lambda: [one(name) for name in c.recv])  # auto keeps what it measures
        fit = int(c.case_seconds / warm) if warm > 0 else c.max_repeats
        for name, auto in autos.items():
            while auto.deciding and warmups[name] <= MAX_AUTO_WARMUP:
                one(name)
                warmups[name] += 1
        for samples in stats.values():
            samples.clear()
        pids = getattr(sampler.venv, "worker_pids", [])
        rss = sum(psutil.Process(pid).memory_info().rss for pid in pids) / n / 1e6 if pids else None
        times = h.interleaved({name: functools.partial(one, name) for name in c.recv},
                              max(c.repeats, min(c.max_repeats, fit)), rotate=True)  # fmt: skip
    finally:
        sampler.close()
    rows = []
    for name in c.recv:
        st = stats[name]
        row = Row(hidden, epw, n, length, name, h.summarize(times[name]),
                  float(np.mean([s["mean_workers_per_recv"] for s in st])),
                  float(np.mean([s["forward_passes"] for s in st])) / length,
                  float(np.mean([s["forward_s"] / s["wall_s"] for s in st])),
                  rss_per_env_mb=rss)  # fmt: skip
        if name in autos:
            info = autos[name].summary()
            trial = info.get("trial_partial_vs_wait")
            trial_text = "no trial" if trial is None else f"trial partial/wait {trial:.2f}x"
            row.auto = f"{info['mode']} ({trial_text}, {warmups[name]} warm-up samples)"
            row.step_mean_s, row.step_cv = info.get("step_mean_s"), info.get("step_cv")
        rows.append(row)
    fixed = [r for r in rows if r.recv != "auto"]
    best = min(fixed, key=lambda r: r.per_iteration.median) if fixed else None
    auto_row = next((r for r in rows if r.recv == "auto"), None)
    for r in rows:
        r.vs_best_fixed = h.ratio(r.per_iteration, best.per_iteration if best else None)
        r.best_fixed = r is best
        if auto_row:  # the workers' step times, measured by auto, hold for the whole case
            r.step_mean_s, r.step_cv = auto_row.step_mean_s, auto_row.step_cv
    h.progress(f"{where}: done")
    return rows


def measure(c: Config, meta: h.Metadata) -> list[Row]:
    import torch

    workers = c.workers or physical_cores()
    meta.params["workers_resolved"] = workers
    torch.set_num_threads(1)
    cases = [(widths(hid), epw) for hid in c.hidden for epw in sorted(set(c.envs_per_worker))]
    return [row for hid, epw in cases if (hid, epw) not in SKIP
            for row in measure_case(c, workers, epw, hid)]  # fmt: skip


def size(hidden: tuple[int, ...]) -> str:
    return "x".join(map(str, hidden))


def optional(value: float | None, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


COLUMNS: list[h.Col[Row]] = [
    h.Col("envs/worker", lambda r: r.envs_per_worker),
    h.Col("envs", lambda r: r.num_envs),
    h.Col("L", lambda r: r.episode_length),
    h.Col("recv", lambda r: r.recv + (" (best fixed)" if r.best_fixed else ""), "l"),
    h.Col("ms / iteration: median (min–max)",
          lambda r: h.fmt_spread(r.per_iteration, lambda v: f"{v * 1e3:.2f}")),
    h.Col("spread / repeats", lambda r: f"{r.spread:.0%} / {len(r.per_iteration.samples)}"),
    h.Col("vs best fixed", lambda r: optional(r.vs_best_fixed, ".3f")),
    h.Col("workers / recv", lambda r: f"{r.workers_per_recv:.2f}"),
    h.Col("forwards / iteration", lambda r: f"{r.forwards_per_iteration:.2f}"),
    h.Col("forward share", lambda r: f"{r.forward_share:.0%}"),
    h.Col("worker step ms", lambda r: optional(r.step_mean_s and r.step_mean_s * 1e3, ".2f")),
    h.Col("step CV", lambda r: optional(r.step_cv, ".2f")),
    h.Col("RSS MB / env", lambda r: optional(r.rss_per_env_mb, ".2f")),
    h.Col("auto", lambda r: r.auto, "l"),
]  # fmt: skip


def report(rows: list[Row], meta: h.Metadata) -> h.Report:
    sizes = list(dict.fromkeys(r.hidden for r in rows))
    autos = [r.vs_best_fixed for r in rows if r.recv == "auto" and r.vs_best_fixed is not None]
    ratios = []
    if autos:
        ratios.append(
            f"auto / best fixed policy: worst {max(autos):.3f}, median {np.median(autos):.3f}, "
            f"within 1.10 in {sum(a <= 1.1 for a in autos)} of {len(autos)} cases (median "
            f"spread of a cell's repeats {np.median([r.spread for r in rows]):.0%})"
        )
    by = {(r.hidden, r.envs_per_worker, r.recv): r for r in rows}
    for hid, epw, _ in [k for k in by if k[2] == "all"]:
        if (t := by.get((hid, epw, "timeout=0.0001"))) is not None:
            value = t.per_iteration.median / by[(hid, epw, "all")].per_iteration.median
            ratios.append(
                f"timeout=1e-4 / wait-all at {epw} envs/worker, hidden {size(hid)}: {value:.3f}"
            )
    panels = []
    for hid in sizes:
        mine = [r for r in rows if r.hidden == hid]
        series = []
        for i, name in enumerate(dict.fromkeys(r.recv for r in mine)):
            pts = [r for r in mine if r.recv == name]
            base = [by.get((hid, r.envs_per_worker, "all"), r).per_iteration.median for r in pts]
            y = [r.per_iteration.median / b for r, b in zip(pts, base, strict=True)]
            fmt = "-o" if name in ("all", "auto") else "--."
            series.append(Series(name, [r.envs_per_worker for r in pts], y, fmt=fmt, color=f"C{i}"))
        ticks = [(e, str(e)) for e in dict.fromkeys(r.envs_per_worker for r in mine)]
        panels.append(Panel(f"{meta.params['env']}, hidden {size(hid)}", series, "envs per worker",
                            "time per iteration / wait-all", ticks, logx=10,
                            hlines=[(1.0, "-", None)]))  # fmt: skip
    heads = ("source", "workers × envs", "compared", "result")
    return h.Report(
        f"Partial collection: wait for all vs timeout vs min_envs vs auto (`{h.PROG} partial`)",
        "; ".join(ratios) or "none",
        [
            f"### policy hidden {size(hid)}\n\n"
            + h.table(COLUMNS, [r for r in rows if r.hidden == hid])
            for hid in sizes
        ],
        panels,
        "partial collection benchmark",
        preface=[
            "The parallel-sampling post's numbers (8 workers, HalfCheetahDir, GPU policy; "
            f"not re-measured here):\n\n{h.text_table(heads, SEED_001)}"
        ],
    )
