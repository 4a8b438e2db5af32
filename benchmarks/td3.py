"""`python -m benchmarks td3`: TD3 on MuJoCo, pararl (async) against SB3's TD3 with
rl-zoo's settings (`lib.compare`); finished seeds are kept in `results/td3`.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.lib import compare
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Comparison, System

ROW = Comparison(
    name="td3",
    title="TD3 on MuJoCo against SB3 at the same budget",
    systems=(
        System("pararl", "pararl TD3 (async)", "td3"),
        System("sb3", "SB3 TD3", "td3", anchor="rl-zoo"),
    ),
    runs=("HalfCheetah-v5:0", "HalfCheetah-v5:1", "HalfCheetah-v5:2"),
    budget=200_000,
    eval_every=10_000,
    run_timeout_s=4 * 3600.0,
    keep_dir="results/td3",
    kept=("learning_starts", "sb3_threads"),
    quick=dict(
        runs=("HalfCheetah-v5:0",),
        budget=3_000,
        eval_every=1_000,
        eval_episodes=1,
        final_evals=1,
        run_timeout_s=900.0,
    ),
    notes=(
        "Both systems: rl-zoo's MuJoCo TD3 settings (400x300, lr 1e-3, batch 256, tau "
        "0.005, gamma 0.99, policy delay 2, target noise 0.2 clipped at 0.5, exploration "
        "noise 0.1, one update per env step). pararl: `pararl train td3` with its defaults "
        "(async: one actor process, 4 envs); SB3: `TD3('MlpPolicy')` on one env."
    ),
    # rl-zoo's benchmark.md (v3, one run, deterministic evaluation of the final agent)
    published=("env", "rl-zoo (v3, 1M steps, 1 run)"),
    figures={"HalfCheetah": ("9656 ± 970",)},
    lines={"HalfCheetah": (9656.0, "rl-zoo at 1M (v3)")},
    published_note="Published 1M-step figure (its own page; not re-measured):",
)


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """TD3 on MuJoCo (200k steps, async) against SB3's TD3. --quick: HalfCheetah, one
    seed, 3,000 steps, nothing kept."""

    learning_starts: int = 10_000
    """Uniformly random env steps before the first update (both systems)."""
    sb3_threads: int = 0
    """Torch threads of the SB3 process (0: torch's default, one per core)."""


def flags(c: Config) -> tuple[dict[str, object], dict[str, object]]:
    """The settings the options give both systems: pararl's flags, then the anchor's."""
    anchor: dict[str, object] = {"learning_starts": c.learning_starts, "threads": c.sb3_threads}
    return {"learning_starts": c.learning_starts}, anchor


resolve, measure, report = compare.one(
    ROW,
    f"TD3 on MuJoCo against SB3 (`{h.PROG} td3`)",
    flags,
    quick={"learning_starts": 1_000, "sb3_threads": 1},
    checks=(">= 0: learning_starts sb3_threads",),
)
