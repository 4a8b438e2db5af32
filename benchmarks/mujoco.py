"""`python -m benchmarks mujoco`: PPO on MuJoCo with its continuous-control defaults,
against SB3's PPO with `VecNormalize` and the same settings (`lib.compare`).
CleanRL's, rl-zoo's and Tianshou's published 1M-step figures stand beside (not
re-measured)."""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.lib import compare
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Comparison, System

ROW = Comparison(
    name="mujoco",
    title="PPO on MuJoCo against SB3 at the same budget",
    systems=(
        System("pararl", "pararl PPO", "ppo"),
        System("sb3", "SB3 PPO + VecNormalize", "ppo", anchor="vecnormalize"),
    ),
    runs=(*(f"HalfCheetah-v5:{seed}" for seed in range(6)), "Hopper-v5:0", "Walker2d-v5:0"),
    # the claim against SB3 is HalfCheetah's; the other envs are held against the
    # published figures, and an SB3 run costs about twice pararl's
    anchor_envs=("HalfCheetah-v5",),
    budget=1_000_000,
    eval_every=20_000,
    quick=dict(
        runs=("HalfCheetah-v5:0",), budget=8_192, eval_every=4_096, eval_episodes=1, final_evals=1
    ),
    notes=(
        "Both systems: 8 envs x 256 steps per rollout, 10 epochs of 64-sample minibatches, "
        "lr 3e-4 annealed, gamma 0.99, lambda 0.95, clip 0.2 (no value clipping), observations "
        "and rewards normalised, clipped at 10. pararl: its defaults for continuous actions, "
        "nothing set; SB3: `VecNormalize` over 8 `DummyVecEnv` envs."
    ),
    # their own docs. CleanRL ppo_continuous_action: v4, mean of the last 100 training
    # episodes over 3 seeds; rl-zoo: v3, tuned per env, one run; Tianshou: v3, 64 envs,
    # best evaluation during training
    published=("env", "CleanRL (v4, 3 seeds)", "rl-zoo (v3, tuned)", "Tianshou (v3, 64 envs)"),
    figures={
        "HalfCheetah": ("1443 ± 46", "5819", "5784 ± 1244"),
        "Hopper": ("2383 ± 272", "2410", "2609 ± 701"),
        "Walker2d": ("2288 ± 572", "3479", "3589 ± 757"),
    },
    lines={
        "HalfCheetah": (1443.0, "CleanRL 1M (v4)"),
        "Hopper": (2383.0, "CleanRL 1M (v4)"),
        "Walker2d": (2288.0, "CleanRL 1M (v4)"),
    },
    published_note="Published 1M-step figures (their docs; not re-measured):",
)


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """PPO on MuJoCo (1M steps) against SB3 + VecNormalize. --quick: HalfCheetah, one
    seed, 8,192 steps."""


resolve, measure, report = compare.one(ROW, f"PPO on MuJoCo against SB3 (`{h.PROG} mujoco`)")
