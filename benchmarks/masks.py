"""`python -m benchmarks masks`: PPO with action masks on Gymnasium's Taxi-v4, pararl
against sb3-contrib's MaskablePPO with the same settings (`lib.compare`); finished seeds
are kept in `results/masks`.

Taxi-v4 gives the legal moves of each state in `info["action_mask"]` (a move into a
wall, a pickup where the passenger is not, a drop-off without the passenger: illegal).
Its `Discrete(500)` state reaches both systems one-hot, through one wrapper
(`lib.taxi`), the same input for both.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.lib import compare, sb3, taxi
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Comparison, System


def pararl_flags() -> dict[str, object]:
    """`pararl train ppo` with the anchor's settings (`lib.sb3.MASKED_PPO`)."""
    s = sb3.MASKED_PPO
    return {
        "num_envs": sb3.MASKED_ENVS, "num_steps": s["n_steps"], "minibatch_size": s["batch_size"],
        "update_epochs": s["n_epochs"], "lr": sb3.MASKED_LR, "anneal_lr": True,
        "gamma": s["gamma"], "gae_lambda": s["gae_lambda"], "clip_coef": s["clip_range"],
        "clip_vloss": str(s["clip_range_vf"] is not None), "ent_coef": s["ent_coef"],
        "vf_coef": s["vf_coef"], "max_grad_norm": s["max_grad_norm"],
        "hidden": tuple(s["policy_kwargs"]["net_arch"]), "shared_body": False,
        "norm_obs": "False", "norm_reward": "False",  # optional flags take a value
    }  # fmt: skip


ROW = Comparison(
    name="masks",
    title="PPO with action masks on Taxi-v4 against sb3-contrib's MaskablePPO",
    systems=(
        System("pararl", "pararl PPO (masked)", "ppo", flags=pararl_flags()),
        System("sb3", "MaskablePPO", "ppo", anchor="masked"),
    ),
    runs=tuple(f"{taxi.ENV}:{seed}" for seed in range(3)),
    budget=300_000,
    eval_every=10_000,
    eval_episodes=20,
    run_timeout_s=3_600.0,
    keep_dir="results/masks",
    kept=("sb3_threads",),
    quick=dict(runs=(f"{taxi.ENV}:0",), **compare.QUICK_RUN),
    notes=(
        "Both systems: PPO on 8 envs x 128 steps (n_steps 128), 4 epochs of 256-sample "
        "minibatches, lr 1e-3 annealed linearly to 0, gamma 0.99, GAE lambda 0.95, clip "
        "0.2, entropy 0.01, value loss weight 0.5 without value clipping, gradient norm "
        "0.5, advantages normalised per minibatch, separate 64x64 tanh actor and critic on "
        "Taxi-v4's Discrete(500) state one-hot (`lib.taxi`'s TaxiOneHot-v0, the same env "
        "for both); illegal actions masked out of the policy in training and in "
        "evaluation. Masks: Taxi-v4's `info['action_mask']` (pararl reads it as it comes; "
        "sb3-contrib through its `ActionMasker`, fed the last info's mask). Evaluation of "
        "both: masked and deterministic, on an env seeded apart. pararl: `pararl train "
        "ppo` in its --mode auto (Taxi's envs are cheap: on 2 cores, async, one actor "
        "process stepping the 8 envs while the learner updates, one rollout behind); "
        "MaskablePPO: 8 envs in one process."
    ),
)


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """PPO with action masks on Taxi-v4 (300k steps) against sb3-contrib's MaskablePPO.
    --quick: one seed, 2,048 steps, nothing kept."""

    sb3_threads: int = 0
    """Torch threads of the MaskablePPO process (0: torch's default, one per core)."""


def flags(c: Config) -> tuple[dict[str, object], dict[str, object]]:
    """The flags the options give both systems: pararl's, then the anchor's."""
    return pararl_flags(), {"threads": c.sb3_threads}


resolve, measure, report = compare.one(
    ROW,
    f"PPO with action masks on Taxi-v4 against MaskablePPO (`{h.PROG} masks`)",
    flags,
    quick={"sb3_threads": 1},
    checks=(">= 0: sb3_threads",),
)
