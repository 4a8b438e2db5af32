"""The benchmarks that are one row of `lib.compare` and nothing more, one table
(`BENCHMARKS`): `python -m benchmarks NAME` trains pararl and its SB3 anchor on the
row's runs; the finished seeds of a row with a `keep_dir` are kept in `results/NAME`.
`dictobs` is `ppo`'s CartPole as a Dict of two keys (`lib.dict_cartpole`), at a fixed
budget; `recurrent` holds pararl's LSTM PPO and its feed-forward PPO (what the memory
is worth) against RecurrentPPO; `minatar_ab` plays each final policy again, greedy and
sampled, alike for both systems (`lib.final_policy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmarks.lib import compare, dict_cartpole, final_policy, sb3, taxi
from benchmarks.lib import harness as h
from benchmarks.lib.compare import NEVER, Comparison, System


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """A learning comparison against SB3 (`lib.compare`). --quick: one seed, a few
    thousand steps, nothing kept."""


@dataclass(frozen=True)
class OffPolicyConfig(Config):
    learning_starts: int = 10_000  # Random env steps before the first update (both systems).


@dataclass(frozen=True)
class PlayedConfig(Config):
    episodes: int = 50  # Episodes each final policy plays, greedy and again sampled.


@dataclass(frozen=True)
class SACConfig(OffPolicyConfig):
    hidden: tuple[int, ...] = (256, 256)  # Hidden widths of the actor and each critic (both).


PPO = compare.solve_cartpole("ppo", (
    System("pararl", "pararl PPO (defaults)", "ppo"),
    System("pararl-serial", "pararl PPO serial", "ppo", {"mode": "serial"}, default=False),
    System("pararl-sync", "pararl PPO sync", "ppo", {"mode": "sync"}, default=False),
), budget=100_000, quick=2_048)  # fmt: skip


def published(figures: Mapping[str, tuple[str, ...]], label: str) -> dict[str, tuple[float, str]]:
    """The figure ("1443 ± 46") of each env in the first source's column, as a line."""
    return {env: (float(row[0].split()[0]), label) for env, row in figures.items()}


MUJOCO_FIGURES = {"HalfCheetah": ("1443 ± 46", "5819", "5784 ± 1244"),
                  "Hopper": ("2383 ± 272", "2410", "2609 ± 701"),
                  "Walker2d": ("2288 ± 572", "3479", "3589 ± 757")}  # fmt: skip
MUJOCO = Comparison(
    name="mujoco", title="PPO on MuJoCo against SB3 at the same budget",
    systems=(System("pararl", "pararl PPO", "ppo"),
             System("sb3", "SB3 PPO + VecNormalize", "ppo", anchor="vecnormalize")),
    runs=(*(f"HalfCheetah-v5:{seed}" for seed in range(6)), "Hopper-v5:0", "Walker2d-v5:0"),
    # the claim against SB3 is HalfCheetah's; the other envs are held against the
    # published figures, and an SB3 run costs about twice pararl's
    anchor_envs=("HalfCheetah-v5",), budget=1_000_000, eval_every=20_000,
    quick=dict(runs=("HalfCheetah-v5:0",), budget=8_192, eval_every=4_096, eval_episodes=1,
               final_evals=1),
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
    figures=MUJOCO_FIGURES, lines=published(MUJOCO_FIGURES, "CleanRL 1M (v4)"),
    published_note="Published 1M-step figures (their docs; not re-measured):",
)  # fmt: skip
# a MuJoCo off-policy row's --quick: HalfCheetah, one seed, 3,000 steps
OFF_POLICY_QUICK = dict(runs=("HalfCheetah-v5:0",), budget=3_000, eval_every=1_000,
                        eval_episodes=1, final_evals=1, run_timeout_s=900.0)  # fmt: skip
SAC_FIGURES = {"HalfCheetah": ("9535 ± 100", "9635 ± 1424", "~11,250"),
               "Hopper": ("2326 ± 1130", "2310 ± 343", "~3,250"),
               "Walker2d": ("3863 ± 254", "3591 ± 911", "~4,800")}  # fmt: skip

SAC = Comparison(
    name="sac", title="SAC on MuJoCo against SB3 at the same budget",
    systems=(System("pararl", "pararl SAC (async)", "sac"),
             System("sb3", "SB3 SAC", "sac", anchor="rl-zoo")),
    runs=("HalfCheetah-v5:0", "HalfCheetah-v5:1", "HalfCheetah-v5:2", "Hopper-v5:0"),
    budget=300_000, eval_every=10_000, run_timeout_s=4 * 3600.0, keep_dir="results/sac",
    kept=("learning_starts", "hidden", "sb3_threads"), quick=OFF_POLICY_QUICK,
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
    figures=SAC_FIGURES, lines=published(SAC_FIGURES, "rl-zoo at 1M (v3)"),
    published_note=(
        "Published 1M-step figures (their own pages; not re-measured; older MuJoCo versions; "
        "CleanRL's is the training episodes' return, the others deterministic evaluations):"
    ),
)  # fmt: skip
TD3 = Comparison(
    name="td3", title="TD3 on MuJoCo against SB3 at the same budget",
    systems=(System("pararl", "pararl TD3 (async)", "td3"),
             System("sb3", "SB3 TD3", "td3", anchor="rl-zoo")),
    runs=("HalfCheetah-v5:0", "HalfCheetah-v5:1", "HalfCheetah-v5:2"), budget=200_000,
    eval_every=10_000, run_timeout_s=4 * 3600.0, keep_dir="results/td3", reach=0.6,
    kept=("learning_starts", "sb3_threads"), quick=OFF_POLICY_QUICK,
    notes=(
        "Both systems: rl-zoo's MuJoCo TD3 settings (400x300, lr 1e-3, batch 256, tau "
        "0.005, gamma 0.99, policy delay 2, target noise 0.2 clipped at 0.5, exploration "
        "noise 0.1, one update per env step). pararl: `pararl train td3` with its defaults "
        "(async: one actor process, 4 envs); SB3: `TD3('MlpPolicy')` on one env."
    ),
    # rl-zoo's benchmark.md (v3, one run, deterministic evaluation of the final agent)
    published=("env", "rl-zoo (v3, 1M steps, 1 run)"), figures={"HalfCheetah": ("9656 ± 970",)},
    lines={"HalfCheetah": (9656.0, "rl-zoo at 1M (v3)")},
    published_note="Published 1M-step figure (its own page; not re-measured):",
)  # fmt: skip


def sb3_flags(s: Mapping[str, Any], envs: int, lr: float, clip: float | None = None,
              **more: object) -> dict[str, object]:  # fmt: skip
    """`pararl train ppo` with an SB3 anchor's PPO settings `s` (SB3's names and its
    defaults for what `s` leaves out), `envs` envs and `lr` annealed, stated rather than
    left to pararl's defaults: separate actor and critic; `clip`: the clip range,
    annealed with the rate (else `s`'s, held); then `more`."""
    flags: dict[str, object] = {
        "num_envs": envs, "num_steps": s["n_steps"], "minibatch_size": s["batch_size"],
        "update_epochs": s["n_epochs"], "lr": lr, "anneal_lr": True,
        "gamma": s["gamma"], "gae_lambda": s["gae_lambda"],
        "clip_coef": s["clip_range"] if clip is None else clip,
        "clip_vloss": str(s.get("clip_range_vf") is not None), "ent_coef": s["ent_coef"],
        "vf_coef": s.get("vf_coef", 0.5), "max_grad_norm": s.get("max_grad_norm", 0.5),
        "shared_body": False,
    }  # fmt: skip
    if clip is not None:
        flags["anneal_clip"] = True
    if "policy_kwargs" in s:
        flags["hidden"] = tuple(s["policy_kwargs"]["net_arch"])
    return flags | more


def masks_flags() -> dict[str, object]:
    """The anchor's settings (`lib.sb3.MASKED_PPO`), no normalisation (optional flags
    take a value)."""
    return sb3_flags(sb3.MASKED_PPO, sb3.MASKED_ENVS, sb3.MASKED_LR, norm_obs="False",
                     norm_reward="False")  # fmt: skip


MASKS = Comparison(
    name="masks", title="PPO with action masks on Taxi-v4 against sb3-contrib's MaskablePPO",
    systems=(System("pararl", "pararl PPO (masked)", "ppo", flags=masks_flags()),
             System("sb3", "MaskablePPO", "ppo", anchor="masked")),
    runs=tuple(f"{taxi.ENV}:{seed}" for seed in range(3)), budget=300_000, eval_every=10_000,
    eval_episodes=20, run_timeout_s=3_600.0, keep_dir="results/masks", kept=("sb3_threads",),
    quick=dict(runs=(f"{taxi.ENV}:0",), **compare.QUICK_RUN),
    notes=(
        "Both systems: `lib.sb3.MASKED_PPO` (8 envs x 128 steps, 4 epochs of 256, lr 1e-3 "
        "annealed, clip 0.2, entropy 0.01, no value clipping, separate 64x64 tanh actor and "
        "critic) on Taxi-v4's state one-hot (`lib.taxi`), illegal actions (Taxi's "
        "`info['action_mask']`; sb3-contrib's through its `ActionMasker`) masked out in "
        "training and in the deterministic evaluation on an env seeded apart. pararl: its "
        "--mode auto (cheap envs, 2 cores: async, one actor process of the 8 envs); "
        "MaskablePPO: 8 envs in one process."
    ),
)  # fmt: skip


def zoo_ppo_flags(**more: object) -> dict[str, object]:
    """The zoo's CartPole-v1 PPO settings (`lib.sb3.ZOO_PPO`, which its CartPoleNoVel-v1
    RecurrentPPO shares): the clip range annealed with the rate, the value loss
    unclipped; then `more`."""
    return sb3_flags(sb3.ZOO_PPO, sb3.ZOO_PPO_ENVS, sb3.ZOO_PPO_LR, sb3.ZOO_PPO_CLIP, **more)


def dictobs_flags() -> dict[str, object]:
    """The zoo's CartPole-v1 settings with the multi-input encoder."""
    return zoo_ppo_flags(hidden=(64, 64), norm_obs="False", norm_reward="False",
                         model="multi-input")  # fmt: skip


DICTOBS = Comparison(
    name="dictobs",
    title="PPO on Dict observations (CartPole's state as two keys) against MultiInputPolicy",
    systems=(System("pararl", "pararl PPO (multi-input)", "ppo", flags=dictobs_flags()),
             System("sb3", "SB3 PPO (MultiInputPolicy)", "ppo", anchor="multi-input")),
    runs=tuple(f"{dict_cartpole.ENV}:{seed}" for seed in range(3)), budget=50_000,
    eval_every=5_000, eval_episodes=10, run_timeout_s=1_800.0, keep_dir="results/dictobs",
    kept=("sb3_threads",), quick=dict(runs=(f"{dict_cartpole.ENV}:0",), **compare.QUICK_RUN),
    notes=(
        "Both systems: rl-baselines3-zoo's CartPole-v1 settings (`lib.sb3.ZOO_PPO`: 8 envs x "
        "32 steps, 20 epochs of 256, lr 1e-3 and clip 0.2 annealed, gamma 0.98, GAE lambda "
        "0.8, no value clipping, no normalisation) on CartPole-v1's state as a Dict of "
        "`cart` and `pole` (`lib.dict_cartpole`), the same network: the two keys flattened "
        "side by side (pararl's multi-input encoder, SB3's CombinedExtractor) under separate "
        "64x64 tanh actor and critic MLPs. pararl: `--model multi-input`, its --mode auto "
        "(cheap envs, 2 cores: async, one actor process of the 8 envs); SB3: "
        "MultiInputPolicy, 8 envs in one process."
    ),
)  # fmt: skip

CARTPOLE = "pararl/StatelessCartPole-v0"
MEMORY = "pararl/RepeatPrevious-v0"
# POPGym's (the `popgym` extra): name the card 4 back (4 suits, 51-step episodes, most
# 1.0, random about -0.5); CartPole showing positions only (200 steps, most 1.0)
POPGYM = ("popgym:popgym-RepeatPreviousEasy-v0", "popgym:popgym-PositionOnlyCartPoleEasy-v0")
ENVS = (CARTPOLE, MEMORY, *POPGYM)
MEMORY_BUDGET = 20_000  # RecurrentPPO with these settings evaluated at 1.0 from 2.5k steps on


def recurrent_flags(recurrent: bool = True) -> dict[str, object]:
    """The zoo's RecurrentPPO settings (`lib.sb3.ZOO_LSTM`); `recurrent`: an LSTM of the
    zoo's size, else the same PPO without one. A minibatch of the whole rollout (8 envs
    x 32 steps = 256), so recurrent minibatches of whole env sequences take all 8 envs'."""
    policy = sb3.ZOO_LSTM_POLICY
    flags = zoo_ppo_flags(hidden=tuple(policy["net_arch"]["pi"]), norm_obs="True",
                          norm_reward="True")  # fmt: skip
    if recurrent:
        flags |= {"recurrent": "lstm", "recurrent_size": policy["lstm_hidden_size"],
                  "recurrent_layers": 1}  # fmt: skip
    return flags


RECURRENT = Comparison(
    name="recurrent",
    title="Recurrent PPO on tasks that need memory against sb3-contrib's RecurrentPPO",
    systems=(System("pararl-lstm", "pararl PPO (LSTM)", "ppo", flags=recurrent_flags()),
             System("sb3", "RecurrentPPO", "ppo", anchor="recurrent"),
             System("pararl-ff", "pararl PPO (feed-forward)", "ppo", flags=recurrent_flags(False))),
    # POPGym needs its extra. pararl's on 9 seeds: a policy lost late in training on about
    # one run in six (results/notes-2026-11-29.md), which 3 seeds cannot tell from none;
    # RecurrentPPO (over an hour a run) on the first 3
    runs=tuple(f"{env}:{seed}" for seed in range(9) for env in ENVS), anchor_seeds=(0, 1, 2),
    budget=sb3.ZOO_LSTM_STEPS, budgets={MEMORY: MEMORY_BUDGET}, eval_every=5_000,
    run_timeout_s=10_800.0,  # RecurrentPPO ran past an hour at 100k steps on 2 shared cores
    reach=0.33,
    keep_dir="results/recurrent", kept=("sb3_threads",),
    quick=dict(runs=(f"{MEMORY}:0",), **compare.QUICK_RUN),
    notes=(
        "All three systems: rl-baselines3-zoo's CartPoleNoVel-v1 settings for RecurrentPPO "
        "(`lib.sb3.ZOO_LSTM`: 8 envs x 32 steps, 20 epochs of the whole rollout, lr 1e-3 and "
        "clip 0.2 annealed, gamma 0.98, GAE lambda 0.8, no value clipping, observations and "
        "rewards normalised), evaluation deterministic on an env seeded apart. Networks: "
        "RecurrentPPO's MlpLstmPolicy as the zoo gives it (an LSTM of 64 each for actor and "
        "critic, then 64 ReLU units); pararl's LSTM PPO (`--recurrent lstm --recurrent-size "
        "64`) with its own 64-unit heads; pararl's feed-forward PPO without the LSTM, which "
        "sees only the present. StatelessCartPole: CartPole-v1 without its velocities (most "
        "500); RepeatPrevious: name the symbol of one step before (most 1.0, without memory "
        "0.0); POPGym's (Morad et al. 2023) RepeatPreviousEasy (a Discrete value, one-hot, "
        "not normalised) and PositionOnlyCartPoleEasy (most 1.0 each). pararl: its --mode "
        "auto; RecurrentPPO: 8 envs in one process. pararl's systems on seeds 0-8, "
        "RecurrentPPO on seeds 0-2 (the time to reach its final: those 3 seeds)."
    ),
    lines={"StatelessCartPole": (500.0, "the most (500 steps)"),
           "RepeatPrevious": (0.0, "the most without memory"),
           "RepeatPreviousEasy": (1.0, "the most"), "PositionOnlyCartPoleEasy": (1.0, "the most")},
)  # fmt: skip

MINATAR_AB = Comparison(
    name="minatar_ab", title="PPO on MinAtar against SB3, final policies evaluated alike",
    systems=(System("pararl", "pararl PPO", "ppo", {"workers": 2, "envs_per_worker": 4}),
             System("sb3", "SB3 PPO", "ppo", anchor="minatar")),  # 8 envs each
    runs=tuple(f"MinAtar/SpaceInvaders-v1:{seed}" for seed in range(5)), budget=300_000,
    eval_every=NEVER, final_evals=1, run_timeout_s=1800.0, extras=final_policy.METRICS,
    quick=dict(runs=("MinAtar/Breakout-v1:0",), budget=8_192),
    notes=(
        "8 envs, each system's MinAtar PPO settings (the same numbers; `minatar_ppo` in "
        "`benchmarks/lib/sb3.py`); no evaluation during training (pararl evaluates its final "
        "weights once). Each final policy then plays the same episodes (`--episodes`) twice, "
        "sticky actions 0.1 as in training: greedy (the most likely action) and sampled. "
        "Training: the mean return of the run's last 20 training episodes. Entropy: the "
        "policy's mean over the states of its sampled episodes (uniform over the game's "
        "actions would be ln(actions))."
    ),
)  # fmt: skip

# NAME: its options, its row, its section's heading
BENCHMARKS: dict[str, tuple[type[Config], Comparison, str]] = {
    "ppo": (Config, PPO, "PPO: time to solve against SB3"),
    "mujoco": (Config, MUJOCO, "PPO on MuJoCo against SB3"),
    "sac": (SACConfig, SAC, "SAC on MuJoCo against SB3"),
    "td3": (OffPolicyConfig, TD3, "TD3 on MuJoCo against SB3"),
    "masks": (Config, MASKS, "PPO with action masks on Taxi-v4 against MaskablePPO"),
    "dictobs": (Config, DICTOBS, "PPO on Dict observations against SB3's MultiInputPolicy"),
    "recurrent": (Config, RECURRENT, "Recurrent PPO on memory tasks against RecurrentPPO"),
    "minatar_ab": (
        PlayedConfig,
        MINATAR_AB,
        "PPO on MinAtar against SB3, final policies evaluated alike",
    ),
}


def benchmark(name: str) -> Any:
    """NAME's `Config`, `ROW`, `resolve`, `measure` and `report`, as a module has them."""
    config, row, heading = BENCHMARKS[name]
    off_policy = issubclass(config, OffPolicyConfig)
    checks = [">= 0: learning_starts"] if off_policy else []
    if issubclass(config, SACConfig):
        checks.append(">= 1: hidden")
    quick: dict[str, Any] = {"learning_starts": 1_000} if off_policy else {}
    after = None
    if issubclass(config, PlayedConfig):
        checks, quick, after = [">= 1: episodes"], {"episodes": 3}, final_policy.played
    found = compare.one(row, f"{heading} (`{h.PROG} {name}`)", quick, checks, after)
    found.Config = config
    return found
