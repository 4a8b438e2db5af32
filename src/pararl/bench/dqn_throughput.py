"""Parts 2 and 3 of `pararl bench dqn`: transitions/s of the seed's design against
pararl's async DQN, and how well pararl's acting and learning overlap.

Both time spells of fixed length (`block_s`, after `warmup_s` untimed) on runners
kept open for the whole part, interleaved (A, B, C, A, B, C, ...) `repeats` times.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pararl.bench.common import Summary, interleaved, progress, summarize
from pararl.bench.dqn_pararl import Mode, PararlAsync, Spell, Workload, workload_config
from pararl.bench.seed_dqn import SeedDesign

SEED_DESIGN = "seed_design"
MODES: tuple[Mode, ...] = ("actors", "learner", "ratio", "free")


@dataclass(frozen=True)
class Timing:
    repeats: int = 3
    block_s: float = 3.0
    warmup_s: float = 1.0
    learner_threads: int | None = None  # None: as `pararl train` chooses


@dataclass
class SystemRates:
    """Transitions/s (and, for pararl, updates/s) of one system over the repeats."""

    status: str = "ok"
    note: str = ""
    steps: list[float] = field(default_factory=list)
    updates: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "note": self.note,
            "transitions_per_s": summarize(self.steps).as_dict() if self.steps else None,
            "updates_per_s": summarize(self.updates).as_dict() if self.updates else None,
        }

    @property
    def median(self) -> float | None:
        return summarize(self.steps).median if self.steps else None


def pararl_name(workload: Workload, mode: Mode = "ratio") -> str:
    """`ratio`: learning work per transition as configured; `free`: no ratio, the
    actors collect as fast as they can while the learner learns."""
    return f"pararl_{workload}" if mode == "ratio" else f"pararl_{workload}_free"


def _seed_block(design: SeedDesign, t: Timing, rates: SystemRates) -> float:
    design.run_for(t.warmup_s)
    start = time.perf_counter()
    count = design.run_for(t.block_s)
    rate = count / (time.perf_counter() - start)
    rates.steps.append(rate)
    return rate


def _pararl_block(driver: PararlAsync, mode: Mode, t: Timing, rates: SystemRates) -> float:
    spell: Spell = driver.run(mode, t.block_s, t.warmup_s)
    rates.steps.append(spell.steps_per_s)
    rates.updates.append(spell.updates_per_s)
    return spell.steps_per_s


def _failed(results: dict[str, SystemRates], where: str) -> Callable[[str, Exception], None]:
    def record(name: str, exc: Exception) -> None:
        progress(f"{where}: {name} failed: {type(exc).__name__}: {exc}")
        results[name].status, results[name].note = "failed", f"{type(exc).__name__}: {exc}"

    return record


def measure_actor_count(
    actors: int, workloads: Sequence[Workload], t: Timing, seed: int
) -> dict[str, Any]:
    """Seed design and pararl (each workload) with `actors` actor processes."""
    where = f"throughput, {actors} actor(s)"
    names = [SEED_DESIGN, *(pararl_name(w, m) for w in workloads for m in ("ratio", "free"))]
    results = {name: SystemRates() for name in names}
    on_error = _failed(results, where)
    tasks: dict[str, Callable[[], float]] = {}
    opened: list[SeedDesign | PararlAsync] = []
    try:
        progress(f"{where}: starting ...")
        try:
            design = SeedDesign(actors, seed)
            opened.append(design)
            tasks[SEED_DESIGN] = functools.partial(_seed_block, design, t, results[SEED_DESIGN])
        except Exception as exc:
            on_error(SEED_DESIGN, exc)
        for workload in workloads:
            name = pararl_name(workload, "ratio")
            try:
                driver = PararlAsync(
                    workload_config(workload, seed=seed), actors, t.learner_threads
                )
                opened.append(driver)
            except Exception as exc:
                on_error(name, exc)
                continue
            for mode in ("ratio", "free"):
                name = pararl_name(workload, mode)
                tasks[name] = functools.partial(_pararl_block, driver, mode, t, results[name])
        interleaved(tasks, t.repeats, on_error=on_error)
    finally:
        for runner in opened:
            runner.close()
    seed_rate = results[SEED_DESIGN].median
    ratios = {}
    for name in names[1:]:
        mine = results[name].median
        ratios[name] = None if mine is None or not seed_rate else mine / seed_rate
    progress(f"{where}: ratios to the seed design {ratios}")
    return {
        "actors": actors,
        "systems": {name: r.as_dict() for name, r in results.items()},
        "ratio_to_seed": ratios,
    }


def measure_throughput(
    actor_counts: Sequence[int], workloads: Sequence[Workload], t: Timing, seed: int
) -> list[dict[str, Any]]:
    return [measure_actor_count(n, workloads, t, seed) for n in actor_counts]


def _ratio(a: Summary | None, b: Summary | None) -> float | None:
    return None if a is None or b is None or not b.median else a.median / b.median


def overlap_efficiency(
    summaries: dict[str, dict[str, Summary | None]], replay_ratio: float
) -> dict[str, float | None]:
    """Together ÷ alone for each side, and the async run against the ideal overlap
    (min of the actors' rate and what the learner alone allows at the replay ratio)."""
    actors = summaries["actors"]["steps"]
    learner = summaries["learner"]["updates"]
    out: dict[str, float | None] = {}
    for mode in ("ratio", "free"):
        out[f"actors_{mode}"] = _ratio(summaries[mode]["steps"], actors)
        out[f"learner_{mode}"] = _ratio(summaries[mode]["updates"], learner)
    bound = None
    if actors is not None and learner is not None:
        bound = min(actors.median, learner.median / replay_ratio)
    out["ideal_steps_per_s"] = bound
    ratio_steps = summaries["ratio"]["steps"]
    out["ratio_vs_ideal"] = (
        None if bound is None or ratio_steps is None else ratio_steps.median / bound
    )
    return out


def measure_overlap(workload: Workload, actors: int, t: Timing, seed: int) -> dict[str, Any]:
    """pararl's actors alone, learner alone, and both in the async loop (gated by the
    replay ratio, as `run_async`; and free-running), interleaved."""
    config = workload_config(workload, seed=seed)
    results: dict[str, SystemRates] = {mode: SystemRates() for mode in MODES}
    on_error = _failed(results, "overlap")
    progress(f"overlap: starting {actors} actor(s) ({workload} workload) ...")
    driver = PararlAsync(config, actors, t.learner_threads)
    try:
        tasks: dict[str, Callable[[], float]] = {
            mode: functools.partial(_pararl_block, driver, mode, t, results[mode]) for mode in MODES
        }
        interleaved(tasks, t.repeats, on_error=on_error)
    finally:
        driver.close()
    summaries: dict[str, dict[str, Summary | None]] = {
        mode: {
            "steps": summarize(r.steps) if r.steps and mode != "learner" else None,
            "updates": summarize(r.updates) if r.updates and mode != "actors" else None,
        }
        for mode, r in results.items()
    }
    efficiency = overlap_efficiency(summaries, config.replay_ratio)
    progress(f"overlap: {efficiency}")
    return {
        "actors": actors,
        "workload": workload,
        "replay_ratio": config.replay_ratio,
        "batch_size": config.batch_size,
        "hidden": list(config.hidden),
        "modes": {
            mode: {
                "status": results[mode].status,
                "note": results[mode].note,
                "steps_per_s": None if s["steps"] is None else s["steps"].as_dict(),
                "updates_per_s": None if s["updates"] is None else s["updates"].as_dict(),
            }
            for mode, s in summaries.items()
        },
        "efficiency": efficiency,
    }
