"""`python -m benchmarks sac`: SAC on MuJoCo, pararl (async actors + learner, its
defaults) against SB3's SAC with the same settings (`lib.compare`).

Both run rl-zoo's MuJoCo SAC settings, read from pararl's config
(`SACConfig.BY_KIND["continuous"]`): 256x256 networks, lr 3e-4, batch 256, tau 0.005,
gamma 0.99, 10k uniformly random steps, then one update per env step, a 1M memory,
the temperature tuned toward -|A|. pararl acts in an actor process while it learns;
SB3 alternates one env step and one update on one env. rl-zoo's, CleanRL's and the
SAC paper's published 1M-step figures stand beside (not re-measured).

An env and seed takes about two hours on two cores (both systems), so each one whose
runs all ended is kept in the repository (`results/sac/ENV-seedSEED.json`) and read
back by a later invocation with the same settings: the default three HalfCheetah seeds
and Hopper can be run in different sittings. Both systems of one seed always run in
the same sitting, since only times measured together compare.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

from benchmarks.lib import compare
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Comparison, Outcome, System

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


QUICK = {"learning_starts": 1_000, "sb3_threads": 1}


def row(c: Config) -> Comparison:
    """The table's row with the settings the options give both systems."""
    pararl = {"learning_starts": c.learning_starts, "hidden": c.hidden}
    anchor = {"learning_starts": c.learning_starts, "net": list(c.hidden)}
    ours, theirs = ROW.systems
    return dataclasses.replace(ROW, systems=(
        dataclasses.replace(ours, flags=pararl),
        dataclasses.replace(theirs, flags={**anchor, "threads": c.sb3_threads}),
    ))  # fmt: skip


def resolve(config: Config) -> Config:
    c = h.apply_quick(compare.resolve(ROW, config), QUICK)
    h.require(c, ">= 1: hidden", ">= 0: learning_starts sb3_threads")
    return c


def measure(c: Config, meta: h.Metadata) -> Outcome:
    return compare.measure(row(c), c, meta)


def report(outcome: Outcome, meta: h.Metadata) -> h.Report:
    c = SimpleNamespace(**meta.params)
    ratios, blocks, panels = compare.report(row(Config(**meta.params)), outcome, c)
    return h.Report(f"SAC on MuJoCo against SB3 (`{h.PROG} sac`)", ratios, blocks, panels,
                    figure_alt="SAC MuJoCo benchmark", legend_below=True)  # fmt: skip
