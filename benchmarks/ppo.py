"""`python -m benchmarks ppo`: time to solve CartPole-v1, `pararl train ppo` with its
defaults against SB3 PPO with the rl-baselines3-zoo settings (`lib.solve`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from benchmarks.lib import harness as h
from benchmarks.lib import solve

LABELS = {
    "pararl": "pararl PPO (defaults)",
    "pararl-serial": "pararl PPO serial",
    "pararl-sync": "pararl PPO sync",
    "sb3": "SB3 PPO (zoo)",
}


@dataclass(frozen=True)
class Config(solve.SolveOptions, h.Options):
    """PPO: time to solve CartPole against SB3 PPO (zoo settings). --quick: 1 seed,
    2,048-step budget (< 1 min)."""

    systems: tuple[Literal["pararl", "pararl-serial", "pararl-sync", "sb3"], ...] = (
        "pararl",
        "sb3",
    )
    """Systems to time; `pararl` is `pararl train ppo` with its defaults."""


QUICK = {**solve.QUICK, "budget": 2_048, "eval_every": 1_024}


def resolve(config: Config) -> Config:
    c = h.apply_quick(config, QUICK)
    solve.check(c)
    return c


@dataclass
class Results:
    solve: solve.SolveResult | None = None


def measure(c: Config, meta: h.Metadata) -> Results:
    return Results(solve.measure(c.systems, c, "ppo", LABELS))


def report(r: Results, meta: h.Metadata) -> h.Report:
    blocks, panels, ratios = [], [], []
    if r.solve:
        blocks.append(solve.block(r.solve, meta.params))
        panels.append(solve.panel(r.solve))
        ratios.append(f"PPO time to solve ÷ SB3 (target ≤ 0.5): {solve.ratios_text(r.solve)}")
    return h.Report(
        f"PPO: time to solve against SB3 (`{h.PROG} ppo`)",
        "; ".join(ratios),
        blocks,
        panels,
        "PPO benchmark",
    )
