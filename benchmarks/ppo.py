"""`python -m benchmarks ppo`: time to solve CartPole-v1, `pararl train ppo` with its
defaults against SB3 PPO with the rl-baselines3-zoo settings (a row of `lib.compare`).
(Its double-buffered sampling part went with `--double-buffer`: BENCHMARKS.md,
"Removed, or measured not to pay".)"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from benchmarks.lib import compare
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Outcome, System

SOLVE = compare.solve_cartpole("ppo", (
    System("pararl", "pararl PPO (defaults)", "ppo"),
    System("pararl-serial", "pararl PPO serial", "ppo", {"mode": "serial"}, default=False),
    System("pararl-sync", "pararl PPO sync", "ppo", {"mode": "sync"}, default=False),
), budget=100_000, quick=2_048)  # fmt: skip


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """PPO: time to solve CartPole against SB3 PPO (zoo settings). --quick: 1 seed,
    2,048-step budget (< 1 min)."""


def resolve(config: Config) -> Config:
    return compare.resolve(SOLVE, config)


@dataclass
class Results:
    solve: Outcome | None = None


def measure(c: Config, meta: h.Metadata) -> Results:
    return Results(compare.measure(SOLVE, c, meta))


def report(r: Results, meta: h.Metadata) -> h.Report:
    blocks, panels, ratios = [], [], []
    if r.solve:
        text, solved, curves = compare.report(SOLVE, r.solve, SimpleNamespace(**meta.params))
        blocks += solved
        panels += curves
        ratios.append(f"time to solve (target ≤ 0.5): {text}")
    return h.Report(
        f"PPO: time to solve against SB3 (`{h.PROG} ppo`)",
        "; ".join(ratios),
        blocks,
        panels,
        "PPO benchmark",
    )
