"""The benchmarks that are one row of `lib.compare` and nothing more, one table: each
`python -m benchmarks NAME` of `BENCHMARKS` trains pararl and its SB3 anchor on the
row's runs; finished seeds of a row with a `keep_dir` are kept in `results/NAME`.

- `ppo`: time to solve CartPole-v1, `pararl train ppo` with its defaults against SB3
  PPO with the rl-baselines3-zoo settings.
- `mujoco`: PPO with its continuous-control defaults against SB3's PPO with
  `VecNormalize` and the same settings; CleanRL's, rl-zoo's and Tianshou's 1M-step
  figures beside (not re-measured).
- `sac`, `td3`: pararl (async) against SB3's with rl-zoo's MuJoCo settings.
- `masks`: PPO with Taxi-v4's action masks (`info["action_mask"]`) against
  sb3-contrib's MaskablePPO, the state one-hot through one wrapper (`lib.taxi`).
- `dictobs`: PPO on CartPole's state as a Dict of two keys (`lib.dict_cartpole`),
  pararl's multi-input encoder against SB3's `MultiInputPolicy`, at the zoo's
  CartPole-v1 settings and a fixed budget (where `ppo` stops at its target).
- `recurrent`: LSTM PPO against sb3-contrib's RecurrentPPO with the zoo's
  CartPoleNoVel-v1 settings (`lib.sb3.ZOO_LSTM`), and pararl's feed-forward PPO with
  them too (what the memory is worth), on `pararl/StatelessCartPole-v0` (CartPole
  without its velocities), `pararl/RepeatPrevious-v0` (name the symbol of one step
  before) and two of POPGym's tasks (the `popgym` extra).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.lib import compare, dict_cartpole, sb3, taxi
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Comparison, System


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """A learning comparison against SB3 (`lib.compare`). --quick: one seed, a few
    thousand steps, nothing kept."""


@dataclass(frozen=True)
class OffPolicyConfig(Config):
    learning_starts: int = 10_000
    """Uniformly random env steps before the first update (both systems)."""


@dataclass(frozen=True)
class SACConfig(OffPolicyConfig):
    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the actor and of each critic (both systems)."""


PPO = compare.solve_cartpole("ppo", (
    System("pararl", "pararl PPO (defaults)", "ppo"),
    System("pararl-serial", "pararl PPO serial", "ppo", {"mode": "serial"}, default=False),
    System("pararl-sync", "pararl PPO sync", "ppo", {"mode": "sync"}, default=False),
), budget=100_000, quick=2_048)  # fmt: skip

MUJOCO = Comparison(
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
# a MuJoCo off-policy row's --quick: HalfCheetah, one seed, 3,000 steps
OFF_POLICY_QUICK = dict(runs=("HalfCheetah-v5:0",), budget=3_000, eval_every=1_000,
                        eval_episodes=1, final_evals=1, run_timeout_s=900.0)  # fmt: skip

SAC = Comparison(
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
    quick=OFF_POLICY_QUICK,
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

TD3 = Comparison(
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
    quick=OFF_POLICY_QUICK,
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


def masks_flags() -> dict[str, object]:
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


MASKS = Comparison(
    name="masks",
    title="PPO with action masks on Taxi-v4 against sb3-contrib's MaskablePPO",
    systems=(
        System("pararl", "pararl PPO (masked)", "ppo", flags=masks_flags()),
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


def zoo_ppo_flags(s: dict[str, Any], envs: int, lr: float, clip: float) -> dict[str, object]:
    """`pararl train ppo` with a zoo PPO anchor's settings (`s`: `lib.sb3.ZOO_PPO` or
    `ZOO_LSTM`), stated rather than left to its defaults; the zoo anneals the clip range
    with the learning rate. Separate actor and critic, value loss unclipped."""
    return {
        "num_envs": envs, "num_steps": s["n_steps"], "minibatch_size": s["batch_size"],
        "update_epochs": s["n_epochs"], "lr": lr, "anneal_lr": True, "clip_coef": clip,
        "anneal_clip": True, "gamma": s["gamma"], "gae_lambda": s["gae_lambda"],
        "ent_coef": s["ent_coef"], "vf_coef": 0.5, "max_grad_norm": 0.5, "clip_vloss": "False",
    }  # fmt: skip


def dictobs_flags() -> dict[str, object]:
    """The zoo's CartPole-v1 settings (`lib.sb3.ZOO_PPO`) with the multi-input encoder."""
    zoo = zoo_ppo_flags(sb3.ZOO_PPO, sb3.ZOO_PPO_ENVS, sb3.ZOO_PPO_LR, sb3.ZOO_PPO_CLIP)
    return zoo | {"hidden": (64, 64), "shared_body": False, "norm_obs": "False",
                  "norm_reward": "False", "model": "multi-input"}  # fmt: skip


DICTOBS = Comparison(
    name="dictobs",
    title="PPO on Dict observations (CartPole's state as two keys) against MultiInputPolicy",
    systems=(
        System("pararl", "pararl PPO (multi-input)", "ppo", flags=dictobs_flags()),
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
    s, policy = sb3.ZOO_LSTM, sb3.ZOO_LSTM_POLICY
    flags = zoo_ppo_flags(s, sb3.ZOO_LSTM_ENVS, sb3.ZOO_LSTM_LR, sb3.ZOO_LSTM_CLIP)
    flags |= {"hidden": tuple(policy["net_arch"]["pi"]), "shared_body": False,
              "norm_obs": "True", "norm_reward": "True"}  # fmt: skip
    if recurrent:
        flags |= {"recurrent": "lstm", "recurrent_size": policy["lstm_hidden_size"],
                  "recurrent_layers": 1}  # fmt: skip
    return flags


RECURRENT = Comparison(
    name="recurrent",
    title="Recurrent PPO on tasks that need memory against sb3-contrib's RecurrentPPO",
    systems=(
        System("pararl-lstm", "pararl PPO (LSTM)", "ppo", flags=recurrent_flags()),
        System("sb3", "RecurrentPPO", "ppo", anchor="recurrent"),
        System("pararl-ff", "pararl PPO (feed-forward)", "ppo", flags=recurrent_flags(False)),
    ),
    runs=tuple(f"{env}:{seed}" for seed in range(3) for env in ENVS),  # POPGym needs its extra
    budget=sb3.ZOO_LSTM_STEPS,
    budgets={MEMORY: MEMORY_BUDGET},
    eval_every=5_000,
    eval_episodes=10,
    run_timeout_s=10_800.0,  # RecurrentPPO ran past an hour at 100k steps on 2 shared cores
    keep_dir="results/recurrent",
    kept=("sb3_threads",),
    quick=dict(runs=(f"{MEMORY}:0",), **compare.QUICK_RUN),
    notes=(
        "All three systems: PPO on 8 envs x 32 steps, 20 epochs of one 256-sample "
        "minibatch (the whole rollout), lr 1e-3 and clip range 0.2 each annealed "
        "linearly to 0 over the budget, gamma 0.98, GAE lambda 0.8, no entropy bonus, "
        "value loss weight 0.5 without value clipping, gradient norm 0.5, advantages "
        "normalised per minibatch, observations normalised and rewards scaled by "
        "running statistics (clipped at 10), evaluation deterministic on an env seeded "
        "apart: rl-baselines3-zoo's CartPoleNoVel-v1 settings for RecurrentPPO "
        "(hyperparams/ppo_lstm.yml). Networks: RecurrentPPO's MlpLstmPolicy as the zoo "
        "gives it, an LSTM of 64 for the actor and another for the critic, then 64 "
        "ReLU units each, default (not orthogonal) initialisation; pararl's LSTM PPO "
        "(`--recurrent lstm --recurrent-size 64 --recurrent-layers 1`) with its own "
        "64-unit MLP heads; pararl's feed-forward PPO the same flags without the LSTM "
        "(a 64-unit MLP each for actor and critic), which sees only the present. "
        "StatelessCartPole: CartPole-v1 without its velocities (most 500); "
        "RepeatPrevious: name the symbol of one step before, two symbols, 16-step "
        "episodes (most 1.0, without memory 0.0); POPGym's (Morad et al. 2023) "
        "RepeatPreviousEasy (name the card of 4 steps before, a Discrete value: "
        "observations one-hot, not normalised, by both) and PositionOnlyCartPoleEasy "
        "(most 1.0 each), at the zoo's 100k steps. pararl: `pararl train ppo` in its "
        "--mode auto; RecurrentPPO: 8 envs in one process."
    ),
    lines={
        "StatelessCartPole": (500.0, "the most (500 steps)"),
        "RepeatPrevious": (0.0, "the most without memory"),
        "RepeatPreviousEasy": (1.0, "the most"),
        "PositionOnlyCartPoleEasy": (1.0, "the most"),
    },
)

# NAME: its options, its row, its section's heading
BENCHMARKS: dict[str, tuple[type[Config], Comparison, str]] = {
    "ppo": (Config, PPO, "PPO: time to solve against SB3"),
    "mujoco": (Config, MUJOCO, "PPO on MuJoCo against SB3"),
    "sac": (SACConfig, SAC, "SAC on MuJoCo against SB3"),
    "td3": (OffPolicyConfig, TD3, "TD3 on MuJoCo against SB3"),
    "masks": (Config, MASKS, "PPO with action masks on Taxi-v4 against MaskablePPO"),
    "dictobs": (Config, DICTOBS, "PPO on Dict observations against SB3's MultiInputPolicy"),
    "recurrent": (Config, RECURRENT, "Recurrent PPO on memory tasks against RecurrentPPO"),
}


def benchmark(name: str) -> Any:
    """NAME's `Config`, `ROW`, `resolve`, `measure` and `report`, as a module has them."""
    config, row, heading = BENCHMARKS[name]
    off_policy = issubclass(config, OffPolicyConfig)
    checks = [">= 0: learning_starts"] if off_policy else []
    if issubclass(config, SACConfig):
        checks.append(">= 1: hidden")
    quick = {"learning_starts": 1_000} if off_policy else {}
    found = compare.one(row, f"{heading} (`{h.PROG} {name}`)", quick, checks)
    found.Config = config
    return found
