"""`python -m benchmarks dictobs`: PPO on Dict observations, pararl's multi-input encoder
against SB3's `MultiInputPolicy` with the same settings (`lib.compare`); finished seeds
are kept in `results/dictobs`.

The env is CartPole-v1 with its state as a Dict of two vector keys (`lib.dict_cartpole`:
`cart` and `pole`, two floats each): a Dict that both systems read the same way, each
key flattened and the two side by side under the same MLPs, at rl-baselines3-zoo's
CartPole-v1 settings, which pararl's defaults for discrete actions are. What differs
from `benchmarks ppo`'s CartPole row is the Dict (both systems' multi-input paths:
rollouts that keep a dict of arrays, the extractor that joins them) and a fixed
budget, where that row stops each run at its target.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.lib import compare, dict_cartpole, sb3
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Comparison, System


def pararl_flags() -> dict[str, object]:
    """`pararl train ppo` with the anchor's settings (`lib.sb3.ZOO_PPO`), stated rather
    than left to its defaults; the zoo anneals the clip range with the learning rate."""
    s = sb3.ZOO_PPO
    return {
        "num_envs": sb3.ZOO_PPO_ENVS, "num_steps": s["n_steps"], "minibatch_size": s["batch_size"],
        "update_epochs": s["n_epochs"], "lr": sb3.ZOO_PPO_LR, "anneal_lr": True,
        "clip_coef": sb3.ZOO_PPO_CLIP, "anneal_clip": True, "gamma": s["gamma"],
        "gae_lambda": s["gae_lambda"], "ent_coef": s["ent_coef"], "vf_coef": 0.5,
        "max_grad_norm": 0.5, "clip_vloss": "False", "hidden": (64, 64), "shared_body": False,
        "norm_obs": "False", "norm_reward": "False",  # optional flags take a value
        "model": "multi-input",
    }  # fmt: skip


ROW = Comparison(
    name="dictobs",
    title="PPO on Dict observations (CartPole's state as two keys) against MultiInputPolicy",
    systems=(
        System("pararl", "pararl PPO (multi-input)", "ppo", flags=pararl_flags()),
        System("sb3", "SB3 PPO (MultiInputPolicy)", "ppo", anchor="multi-input"),
    ),
    runs=tuple(f"{dict_cartpole.ENV}:{seed}" for seed in range(3)),
    budget=50_000,
    eval_every=5_000,
    eval_episodes=10,
    run_timeout_s=1_800.0,
    keep_dir="results/dictobs",
    kept=("sb3_threads",),
    quick=dict(runs=(f"{dict_cartpole.ENV}:0",), **compare.QUICK_RUN),
    notes=(
        "Both systems: PPO on 8 envs x 32 steps, 20 epochs of 256-sample minibatches, lr "
        "1e-3 and clip range 0.2 each annealed linearly to 0 over the budget, gamma 0.98, "
        "GAE lambda 0.8, no entropy bonus, value loss weight 0.5 without value clipping, "
        "gradient norm 0.5, advantages normalised per minibatch, no observation or reward "
        "normalisation (rl-baselines3-zoo's CartPole-v1 settings), on CartPole-v1 whose "
        "state is a Dict of `cart` and `pole`, two floats each (`lib.dict_cartpole`'s "
        "DictCartPole-v0, the same env for both). The same network: the two keys "
        "flattened side by side (4 floats; pararl's multi-input encoder, SB3's "
        "CombinedExtractor, neither with weights of its own for vector keys) under "
        "separate 64x64 tanh actor and critic MLPs, orthogonally initialised. pararl: "
        "`pararl train ppo --model multi-input` in its --mode auto (cheap envs: on 2 "
        "cores, async, one actor process stepping the 8 envs while the learner updates, "
        "one rollout behind); SB3: MultiInputPolicy, 8 envs in one process."
    ),
)


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """PPO on Dict observations (DictCartPole-v0, 50k steps, 3 seeds) against SB3's
    MultiInputPolicy. --quick: one seed, 2,048 steps, nothing kept."""

    sb3_threads: int = 0
    """Torch threads of the SB3 process (0: torch's default, one per core)."""


def flags(c: Config) -> tuple[dict[str, object], dict[str, object]]:
    """The flags the options give both systems: pararl's, then the anchor's."""
    return pararl_flags(), {"threads": c.sb3_threads}


resolve, measure, report = compare.one(
    ROW,
    f"PPO on Dict observations against SB3's MultiInputPolicy (`{h.PROG} dictobs`)",
    flags,
    quick={"sb3_threads": 1},
    checks=(">= 0: sb3_threads",),
)
