"""`python -m benchmarks sac`: SAC on MuJoCo, pararl (async) against SB3's SAC with
rl-zoo's settings (`lib.compare`); finished seeds are kept in `results/sac`.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.lib import compare
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Comparison, System

ROW = Comparison(
    name="sac",
    title="SAC on MuJoCo against SB3 at the same budget",
    systems=(
        System("pararl", "pararl SAC (async)", "sac"),
        System("sb3", "SB3 SAC", "sac", anchor="rl-zoo"),
    ),
    runs=("HalfCheetah-v5:0", "HalfCheetah-v5:1", "HalfCheetah-v5:2", "Hopper-v5:0"),
    budget=300_000,
    eval_every=10_000,
    run_timeout_s=4 * 3600.0,
    keep_dir="results/sac",
    kept=("learning_starts", "hidden", "sb3_threads"),
    quick=dict(
        runs=("HalfCheetah-v5:0",),
        budget=3_000,
        eval_every=1_000,
        eval_episodes=1,
        final_evals=1,
        run_timeout_s=900.0,
    ),
    notes=(
        "Both systems: rl-zoo's MuJoCo SAC settings from pararl's config (lr 3e-4, batch 256, "
        "tau 0.005, gamma 0.99, one update per env step, temperature tuned toward -|A| from "
        "1). pararl: `pararl train sac` with its defaults (async: one actor process, 4 envs; "
        "the learner's threads and step mode are in each run's note); SB3: `SAC('MlpPolicy')` "
        "on one env."
    ),
    # their own pages. rl-zoo (benchmark.md): v3, one run, deterministic evaluation of
    # the final agent; CleanRL (docs, sac_continuous_action): v2, training episodic
    # return; the SAC paper (Haarnoja et al. 2018, "Algorithms and Applications", as
    # CleanRL's docs read it off its plots): v2, deterministic evaluation
    published=("env", "rl-zoo (v3, 1 run)", "CleanRL (v2, 3 seeds)", "SAC paper (v2)"),
    figures={
        "HalfCheetah": ("9535 ± 100", "9635 ± 1424", "~11,250"),
        "Hopper": ("2326 ± 1130", "2310 ± 343", "~3,250"),
        "Walker2d": ("3863 ± 254", "3591 ± 911", "~4,800"),
    },
    lines={
        "HalfCheetah": (9535.0, "rl-zoo at 1M (v3)"),
        "Hopper": (2326.0, "rl-zoo at 1M (v3)"),
        "Walker2d": (3863.0, "rl-zoo at 1M (v3)"),
    },
    published_note=(
        "Published 1M-step figures (their own pages; not re-measured; older MuJoCo versions; "
        "CleanRL's is the training episodes' return, the others deterministic evaluations):"
    ),
)


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """SAC on MuJoCo (300k steps, async) against SB3's SAC. --quick: HalfCheetah, one
    seed, 3,000 steps, nothing kept."""

    learning_starts: int = 10_000
    """Uniformly random env steps before the first update (both systems)."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the actor and of each critic (both systems)."""
    sb3_threads: int = 0
    """Torch threads of the SB3 process (0: torch's default, one per core). Two threads
    beside other work on a 2-core machine ran SB3's update ~10x slower than one."""


def flags(c: Config) -> tuple[dict[str, object], dict[str, object]]:
    """The settings the options give both systems: pararl's flags, then the anchor's."""
    anchor = {"learning_starts": c.learning_starts, "net": list(c.hidden), "threads": c.sb3_threads}
    return {"learning_starts": c.learning_starts, "hidden": c.hidden}, anchor


resolve, measure, report = compare.one(
    ROW,
    f"SAC on MuJoCo against SB3 (`{h.PROG} sac`)",
    flags,
    quick={"learning_starts": 1_000, "sb3_threads": 1},
    checks=(">= 1: hidden", ">= 0: learning_starts sb3_threads"),
)
