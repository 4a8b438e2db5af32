"""`python -m benchmarks ppo`: time to solve CartPole-v1, `pararl train ppo` with its
defaults against SB3 PPO with the rl-baselines3-zoo settings (a row of `lib.compare`).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.lib import compare
from benchmarks.lib import harness as h
from benchmarks.lib.compare import System

SOLVE = compare.solve_cartpole("ppo", (
    System("pararl", "pararl PPO (defaults)", "ppo"),
    System("pararl-serial", "pararl PPO serial", "ppo", {"mode": "serial"}, default=False),
    System("pararl-sync", "pararl PPO sync", "ppo", {"mode": "sync"}, default=False),
), budget=100_000, quick=2_048)  # fmt: skip


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """PPO: time to solve CartPole against SB3 PPO (zoo settings). --quick: 1 seed,
    2,048-step budget (< 1 min)."""


resolve, measure, report = compare.one(SOLVE, f"PPO: time to solve against SB3 (`{h.PROG} ppo`)")
