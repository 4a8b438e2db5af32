"""`python -m benchmarks recurrent`: recurrent PPO on tasks that need memory, pararl's
LSTM PPO against sb3-contrib's RecurrentPPO with the same settings, and pararl's
feed-forward PPO with them too (`lib.compare`); finished seeds are kept in
`results/recurrent`.

The settings are rl-baselines3-zoo's for RecurrentPPO on CartPoleNoVel-v1
(hyperparams/ppo_lstm.yml; `lib.sb3.ZOO_LSTM`), given to pararl as flags. The envs
(`pararl.envs.memory`): `pararl/StatelessCartPole-v0`, CartPole-v1 with its
velocities hidden (the zoo's CartPoleNoVel-v1 shows them as zeros; here they are left
out), at the zoo's 100k steps; and `pararl/RepeatPrevious-v0`, naming the symbol of
one step before (most 1.0; without memory 0.0 at best), at a budget of its own; and
two of POPGym's tasks (Morad et al. 2023; the `popgym` extra), RepeatPreviousEasy and
PositionOnlyCartPoleEasy, at 100k steps. The feed-forward system, the same PPO
without memory, shows what the memory is worth.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.lib import compare, sb3
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Comparison, System

CARTPOLE = "pararl/StatelessCartPole-v0"
MEMORY = "pararl/RepeatPrevious-v0"
# POPGym's (the `popgym` extra): name the card 4 back (4 suits, 51-step episodes, most
# 1.0, random about -0.5); CartPole showing positions only (200 steps, most 1.0)
POPGYM = ("popgym:popgym-RepeatPreviousEasy-v0", "popgym:popgym-PositionOnlyCartPoleEasy-v0")
ENVS = (CARTPOLE, MEMORY, *POPGYM)
MEMORY_BUDGET = 20_000  # RecurrentPPO with these settings evaluated at 1.0 from 2.5k steps on


def pararl_flags(recurrent: bool = True) -> dict[str, object]:
    """`pararl train ppo` with the anchor's settings (`lib.sb3.ZOO_LSTM`), stated rather
    than left to its defaults; `recurrent`: an LSTM of the zoo's size, else the same
    PPO without one. A minibatch of the whole rollout (8 envs x 32 steps = 256), so
    recurrent minibatches of whole env sequences take all 8 envs' at once."""
    s, policy = sb3.ZOO_LSTM, sb3.ZOO_LSTM_POLICY
    flags: dict[str, object] = {
        "num_envs": sb3.ZOO_LSTM_ENVS, "num_steps": s["n_steps"],
        "minibatch_size": s["batch_size"], "update_epochs": s["n_epochs"],
        "lr": sb3.ZOO_LSTM_LR, "anneal_lr": True, "clip_coef": sb3.ZOO_LSTM_CLIP,
        "anneal_clip": True, "gamma": s["gamma"], "gae_lambda": s["gae_lambda"],
        "ent_coef": s["ent_coef"], "vf_coef": 0.5, "max_grad_norm": 0.5,
        "clip_vloss": "False", "hidden": tuple(policy["net_arch"]["pi"]), "shared_body": False,
        "norm_obs": "True", "norm_reward": "True",  # optional flags take a value
    }  # fmt: skip
    if recurrent:
        flags |= {"recurrent": "lstm", "recurrent_size": policy["lstm_hidden_size"],
                  "recurrent_layers": 1}  # fmt: skip
    return flags


ROW = Comparison(
    name="recurrent",
    title="Recurrent PPO on tasks that need memory against sb3-contrib's RecurrentPPO",
    systems=(
        System("pararl-lstm", "pararl PPO (LSTM)", "ppo", flags=pararl_flags()),
        System("sb3", "RecurrentPPO", "ppo", anchor="recurrent"),
        System("pararl-ff", "pararl PPO (feed-forward)", "ppo", flags=pararl_flags(False)),
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


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """Recurrent PPO on StatelessCartPole (100k steps), RepeatPrevious (20k) and two
    POPGym tasks (100k), 3 seeds each, against sb3-contrib's RecurrentPPO and pararl's
    feed-forward PPO. --quick: RepeatPrevious, one seed, 2,048 steps, nothing kept."""

    sb3_threads: int = 0
    """Torch threads of the RecurrentPPO process (0: torch's default, one per core)."""


def flags(c: Config) -> tuple[dict[str, object], dict[str, object]]:
    """The flags the options give the systems: pararl's (none beyond each system's
    own), then the anchor's."""
    return {}, {"threads": c.sb3_threads}


resolve, measure, report = compare.one(
    ROW,
    f"Recurrent PPO on memory tasks against RecurrentPPO (`{h.PROG} recurrent`)",
    flags,
    quick={"sb3_threads": 1},
    checks=(">= 0: sb3_threads",),
)
