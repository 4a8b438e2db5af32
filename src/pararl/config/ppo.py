"""The PPO run configuration (`pararl train ppo`). Each field's docstring is its
`--help` text; `BY_KIND` holds the defaults by kind of env."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Annotated, Any, ClassVar, Literal

import tyro

from pararl.config.kinds import EnvKind, ModelChoice
from pararl.config.run import RunConfig, raise_first, unset_or
from pararl.errors import UsageError

_PPO_ATARI: dict[str, Any] = dict(
    total_steps=10_000_000, num_steps=128, lr=2.5e-4, gamma=0.99, gae_lambda=0.95,
    minibatch_size=256, update_epochs=4, clip_vloss=True, vf_coef=0.25, norm_obs=False,
    norm_reward=False, clip_coef=0.1, ent_coef=0.01, recurrent_size=128,
)  # fmt: skip


@dataclass
class PPOConfig(RunConfig):
    """PPO (clipped surrogate, GAE, minibatch epochs) on batched env workers."""

    ENVS_SET_THE_BATCH: ClassVar[bool] = True  # a rollout is num_steps x every env
    DEFAULT_ENVS: ClassVar[int] = 8

    num_envs: int | None = None
    """Envs in a rollout, all workers together (a rollout is num_steps x num_envs).
    Default: 8 (CleanRL's and rl-zoo's), on as many workers as the cores allow that
    split them evenly (2 cores: 2 workers x 4 envs; 16 cores: 8 x 1), so the batch
    does not change with the machine; with --envs-per-worker: workers x that."""
    workers: int | None = None
    """Env worker processes (Ray: actors). Default: as many of the physical cores as
    split --num-envs evenly."""
    envs_per_worker: int | None = None  # type: ignore[assignment]
    """Envs each worker steps. Default: --num-envs split evenly over the workers."""
    # PPO places acting and learning apart (--act-device, --learn-device): the run
    # option of one learner device is kept off its --help and refused on its line
    device: Annotated[Literal["auto", "cpu", "cuda"], tyro.conf.Suppress] = "auto"
    mode: Literal["auto", "serial", "sync", "async"] = "auto"
    """`serial`: envs in this process; `sync`: ParallelVectorEnv workers step them while
    this process runs the policy on the whole batch; `async`: actor processes step the
    envs and act with their own copy of the policy, collecting the next rollout while
    this process updates on the last (--policy-lag); `auto`, on 2 cores or more:
    sync where the envs' step time (measured at start-up) outweighs the round trip to
    the workers, unless one iteration's acting and update, timed at start-up, say
    that overlapping them is shorter (not timed where --workers or --envs-per-worker
    is given, or the learner is on a GPU); else async (serial on one core; a
    recurrent or Gaussian policy: serial or sync, never async)."""
    policy_lag: int = 1
    """--mode async: the actors collect rollout j with the weights learned from the
    rollouts before j - policy_lag, exactly (so a seeded run is reproducible): 1
    overlaps acting with the update; 0 waits for each update, as sync does."""
    vtrace: bool = False
    """--mode async: relabel each rollout's advantages and value targets with V-trace
    (Espeholt et al. 2018) under the learner's weights, instead of GAE under the
    acting ones; the surrogate's ratio is against the acting policy either way."""
    seeds: int = 1
    """Agents to train in this run, one per seed: --seed, --seed + 1, ... Each has
    its own envs (--num-envs each, stepped by the same workers), initialisation,
    minibatches, optimizer state and evaluations, as its run alone would, and all
    are updated in one batched pass (any mode but Ray; normalisation statistics each
    agent's own; recurrent cores and the multi-input encoder are refused).
    --total-steps is each agent's budget.
    metrics.csv and eval.csv get an `agent` column; `pararl evaluate RUN --agent i`
    picks one, and `pararl compare` reads them all."""
    sweep: tuple[str, ...] = ()
    """Settings to sweep in the same run, each `NAME=V1,V2,...` (PPO: lr, gamma,
    gae_lambda, ent_coef, vf_coef, clip_coef, max_grad_norm: those that change no
    shape): every combination trains --seeds agents (e.g. `--sweep lr=1e-4,3e-4,1e-3
    --seeds 4`: 12 agents, seeds shared across combinations), each agent's settings
    saved in config.json; the learning curve draws each combination's IQM."""
    act_device: Literal["auto", "cpu", "cuda"] = "auto"
    """Device for acting (policy forward during sampling); `auto` times both at start-up."""
    learn_device: Literal["auto", "cpu", "cuda"] = "auto"
    """Device for the PPO update; `auto` times both at start-up and takes the faster."""
    model: ModelChoice = "auto"
    """Actor-critic: `mlp` on flattened observations, one shared `nature-cnn` (Mnih
    et al. 2015) or `minatar-cnn` (Young & Tian 2019) trunk on images, or one shared
    `multi-input` encoder on Dict and Tuple observations (a CNN per image key, the
    others flattened or one-hot) and on Discrete and MultiDiscrete ones (one-hot)
    under the MLPs; `auto`: by the observations (images of 36 pixels a side or more
    get the Nature CNN, smaller ones the MinAtar CNN, Dict, Tuple, Discrete and
    MultiDiscrete ones multi-input)."""
    recurrent: Literal["none", "lstm", "gru"] = "none"
    """A recurrent core (an LSTM or a GRU) between the encoder and the heads, so that
    the policy remembers: it reads the observations (normalised; an image trunk's or
    the multi-input encoder's features) and the actor and critic read it. Each env's
    state starts at zeros with its episode; an update replays whole env sequences
    from the states stored at the rollout's start (minibatches of whole envs: the
    minibatches must split --num-envs evenly)."""
    recurrent_size: int | None = None
    """The recurrent core's width. Default: by env kind (64 for vector observations,
    as rl-zoo's recurrent PPO; 128 for images, as CleanRL's ppo_atari_lstm)."""
    recurrent_layers: int = 1
    """The recurrent core's layers."""
    recurrent_critic: bool = False
    """The critic gets a recurrent core of its own (sb3-contrib's RecurrentPPO default,
    `enable_critic_lstm`) instead of reading the actor's: twice the core's compute, and
    the value loss no longer moves the actor's memory."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the actor and critic MLPs."""
    shared_body: bool = False
    """One shared MLP body for actor and critic instead of two separate MLPs."""
    num_steps: int | None = None
    """Steps per env in each rollout (a rollout is num_steps x all envs). Default: by
    env kind."""
    lr: float | None = None
    """Adam learning rate. Default: by env kind."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the step budget."""
    gamma: float | None = None
    """Discount factor. Default: by env kind."""
    gae_lambda: float | None = None
    """GAE lambda. Default: by env kind."""
    minibatch_size: int | None = None
    """Transitions per minibatch. Default: by env kind."""
    update_epochs: int | None = None
    """Passes over each rollout. Default: by env kind."""
    clip_coef: float | None = None
    """Surrogate clipping coefficient (also the value-clipping range). Default: by env
    kind."""
    anneal_clip: bool = False
    """Anneal the surrogate's clip range linearly to 0 over the step budget."""
    clip_vloss: bool | None = None
    """Clip the value loss around the rollout's value estimates (CleanRL's max of the
    clipped and unclipped errors). Default: by env kind: on for images (Atari, MinAtar),
    as CleanRL's ppo_atari; off for vectors, as SB3 and rl-zoo: on CartPole it took ~15%
    more env steps to solve (40 seeds), and on HalfCheetah with the continuous defaults
    it ended in the ~1,700 mode in 4 of 6 seeds against 1 of 6 without it
    (BENCHMARKS.md)."""
    ent_coef: float | None = None
    """Entropy bonus coefficient. Default: by env kind."""
    vf_coef: float | None = None
    """Value loss coefficient; the value loss is the mean squared error (SB3's scale;
    CleanRL halves the error, so its 0.5 is 0.25 here). Default: by env kind."""
    max_grad_norm: float = 0.5
    """Gradient-norm clipping threshold."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    norm_obs: bool | None = None
    """Normalise observations by their running mean and variance over all envs
    (updated after each rollout, saved with the policy, frozen in evaluation; never
    images). Default: by env kind."""
    norm_reward: bool | None = None
    """Scale rewards by the running standard deviation of the discounted return over
    all envs (for learning only; returns are always reported unscaled). Default: by env kind."""
    clip_obs: float = 10.0
    """Normalised observations are clipped to +-this."""
    clip_reward: float = 10.0
    """Scaled rewards are clipped to +-this."""

    # discrete: rl-zoo's CartPole settings; continuous: CleanRL's MuJoCo settings
    # (one env x 2048 steps there; 8 envs x 256 steps here) without its value
    # clipping (see clip_vloss), and the field's usual 1M-step budget; image: CleanRL's
    # ppo_atari (8 envs x 128 steps in 4 minibatches of 256; its value loss 0.5 x half
    # the squared error is 0.25 here); minatar: the same settings with the MinAtar CNN
    # (the MinAtar paper has no PPO), the 10M-step budget of gymnax's MinAtar PPO and
    # an entropy bonus of 0.03: with 0.01 the policy's entropy collapses and Breakout
    # runs stay on a plateau of ~6.5 (2 of 3 seeds at 5M steps; RESULTS.md)
    BY_KIND: ClassVar[dict[EnvKind, dict[str, Any]]] = {
        "discrete": dict(
            total_steps=100_000, num_steps=32, lr=1e-3, gamma=0.98, gae_lambda=0.8,
            minibatch_size=256, update_epochs=20, clip_vloss=False, vf_coef=0.5,
            norm_obs=False, norm_reward=False, clip_coef=0.2, ent_coef=0.0, model="mlp",
            recurrent_size=64, eval_every=2_500, checkpoint_every=25_000,
        ),
        "continuous": dict(
            total_steps=1_000_000, num_steps=256, lr=3e-4, gamma=0.99, gae_lambda=0.95,
            minibatch_size=64, update_epochs=10, clip_vloss=False, vf_coef=0.25,
            norm_obs=True, norm_reward=True, clip_coef=0.2, ent_coef=0.0, model="mlp",
            recurrent_size=64, eval_every=2_500, checkpoint_every=25_000,
        ),
        "image": _PPO_ATARI
        | dict(model="nature-cnn", eval_every=50_000, checkpoint_every=500_000),
        "minatar": _PPO_ATARI
        | dict(model="minatar-cnn", ent_coef=0.03, eval_every=10_000, checkpoint_every=250_000),
    }  # fmt: skip

    def split_envs(self, available: int) -> tuple[int, int]:
        """(workers, envs per worker) of the rollout: `--envs-per-worker` on
        `--workers` (default `available`) when given; else `--num-envs` (default 8)
        on `--workers`, or on the most of `available` workers that split it evenly."""
        if self.envs_per_worker is not None:
            workers = self.workers or available
            if self.num_envs is not None and self.num_envs != workers * self.envs_per_worker:
                raise UsageError(
                    f"--num-envs {self.num_envs} is not {workers} workers x "
                    f"--envs-per-worker {self.envs_per_worker}; give one of the two"
                )
            return workers, self.envs_per_worker
        n = self.num_envs or self.DEFAULT_ENVS
        if self.workers is not None:
            if n % self.workers:
                raise UsageError(
                    f"{n} envs do not split evenly over --workers {self.workers}; give "
                    "--workers that divides --num-envs, or --envs-per-worker"
                )
            return self.workers, n // self.workers
        workers = max(w for w in range(1, min(n, max(1, available)) + 1) if n % w == 0)
        return workers, n // workers

    def __post_init__(self) -> None:
        super().__post_init__()
        self.sweep = _sweep_items(self.sweep)

    @property
    def grid(self) -> list[dict[str, float]]:
        """The settings of each combination `--sweep` names, in order (the last name
        varies fastest); one empty combination without a sweep."""
        axes = [(name, values) for name, values in _parsed(self.sweep)]
        return [dict(zip([a[0] for a in axes], combo, strict=True))
                for combo in itertools.product(*(a[1] for a in axes))]  # fmt: skip

    @property
    def agents(self) -> int:
        """The agents this run trains: --seeds for each combination of --sweep."""
        return self.seeds * len(self.grid)

    def _sweep_problem(self) -> str | None:
        try:
            names = [name for name, _ in _parsed(self.sweep)]
        except UsageError as exc:
            return str(exc)
        if len(set(names)) < len(names):
            return "--sweep names a setting twice; give each once, with all its values"
        return None

    def unused(self) -> frozenset[str]:
        """A recurrent core's size, in a run without a core."""
        return frozenset({"recurrent_size"} if self.recurrent == "none" else ())

    def check_given(self, given: Iterable[str], typed: bool = True) -> None:
        """A setting given both its own value and a sweep's is refused: the sweep's
        values would win without a word. So is a policy lag in a mode without one (its
        default too, where typed), and, typed on the command line (`typed`), a recurrent
        core's size without a core. A config from Python counts as given what differs
        from the defaults, and a saved run's config holds the core size its env's kind
        filled in: reused for a new run, it is not refused for that."""
        given = set(given)
        if typed and self.recurrent == "none":
            for name in ("recurrent_size", "recurrent_layers"):
                if name in given:
                    flag = "--" + name.replace("_", "-")
                    raise UsageError(
                        f"{flag} {getattr(self, name)} sizes a recurrent core, and this run "
                        f"has none: add --recurrent lstm (or gru), or drop {flag}"
                    )
        if self.mode in ("serial", "sync") and "policy_lag" in given:
            raise lag_unused(self.policy_lag, f"--mode {self.mode} has none")
        swept = [name for name, _ in _parsed(self.sweep)]
        for name in swept:
            if name in given:
                flag = "--" + name.replace("_", "-")
                raise UsageError(
                    f"{flag} {getattr(self, name)} and --sweep {name}=...: a swept setting "
                    f"takes its values from --sweep; drop {flag}, or add its value to the sweep"
                )

    def validate(self) -> None:
        super().validate()
        checks = [
            (unset_or(self.num_steps, lambda v: v >= 1), "--num-steps must be >= 1"),
            (unset_or(self.lr, lambda v: v > 0), "--lr must be > 0"),
            (unset_or(self.gamma, lambda v: 0 < v <= 1), "--gamma must be in (0, 1]"),
            (unset_or(self.gae_lambda, lambda v: 0 <= v <= 1), "--gae-lambda must be in [0, 1]"),
            (unset_or(self.minibatch_size, lambda v: v >= 1), "--minibatch-size must be >= 1"),
            (unset_or(self.update_epochs, lambda v: v >= 1), "--update-epochs must be >= 1"),
            (unset_or(self.vf_coef, lambda v: v >= 0), "--vf-coef must be >= 0"),
            (unset_or(self.clip_coef, lambda v: v > 0), "--clip-coef must be > 0"),
            (unset_or(self.ent_coef, lambda v: v >= 0), "--ent-coef must be >= 0"),
            (self.clip_obs > 0, "--clip-obs must be > 0"),
            (self.clip_reward > 0, "--clip-reward must be > 0"),
            (unset_or(self.num_envs, lambda v: v >= 1), "--num-envs must be >= 1"),
            (len(self.hidden) >= 1, "--hidden needs at least one width"),
            (self.policy_lag >= 0, "--policy-lag must be >= 0"),
            (self.seeds >= 1, "--seeds must be >= 1 (the number of agents to train)"),
            (self._sweep_problem() is None, self._sweep_problem() or ""),
            (
                not self.vtrace or self.mode in ("auto", "async"),
                "--vtrace corrects for the policy lag of --mode async; add --mode async, or "
                "drop --vtrace",
            ),
            (
                self.mode != "async" or self.act_device != "cuda",
                "--mode async acts in actor processes on the CPU; drop --act-device cuda",
            ),
            (all(h >= 1 for h in self.hidden), "--hidden widths must be >= 1"),
            (unset_or(self.recurrent_size, lambda v: v >= 1), "--recurrent-size must be >= 1"),
            (self.recurrent_layers >= 1, "--recurrent-layers must be >= 1"),
            (
                self.recurrent != "none" or not self.recurrent_critic,
                "--recurrent-critic gives the critic a core of its own: add --recurrent lstm "
                "(or gru)",
            ),
            (
                self.recurrent == "none" or self.compile != "on",
                "--compile on: a recurrent core replays sequences cut at episode starts, "
                "in pieces whose lengths vary; nothing stable to compile: drop --compile",
            ),
            (
                self.recurrent == "none" or not self.vtrace,
                "--vtrace does not replay a recurrent policy's sequences yet; drop --vtrace "
                "(--mode async without it corrects the lag with the clipped ratio alone)",
            ),
        ]
        raise_first(checks)
        for combo in self.grid if self.sweep else ():  # each swept value, checked as given
            try:
                replace(self, sweep=(), **combo).validate()  # type: ignore[arg-type]
            except UsageError as exc:
                given = " ".join(f"{k}={v:g}" for k, v in combo.items())
                raise UsageError(f"--sweep ({given}): {exc}") from None
        if self.workers is not None:  # the split needs no machine then: check it now
            self.split_envs(self.workers)


def lag_unused(lag: int, why: str) -> UsageError:
    """The one line for a `--policy-lag` given to a run that has no policy lag
    (`why`: which mode it runs in, and why that one)."""
    return UsageError(
        f"--policy-lag {lag} sets the policy lag of --mode async, and {why}; add --mode "
        "async, or drop --policy-lag"
    )


SWEEPABLE = ("lr", "gamma", "gae_lambda", "ent_coef", "vf_coef", "clip_coef", "max_grad_norm")


def _sweep_items(sweep: object) -> tuple[str, ...]:
    """`sweep` as the command line gives it, from the forms Python makes natural: one
    item ("lr=3e-4,1e-3"), or a mapping ({"lr": [3e-4, 1e-3]}); anything else is refused
    in one line."""
    if isinstance(sweep, str):
        return (sweep,)
    if isinstance(sweep, Mapping):
        items = []
        for name, values in sweep.items():
            many = values if isinstance(values, (list, tuple)) else [values]
            items.append(f"{name}={','.join(str(v) for v in many)}")
        return tuple(items)
    if isinstance(sweep, (list, tuple)) and all(isinstance(item, str) for item in sweep):
        return tuple(sweep)
    raise UsageError(
        f"sweep={sweep!r}: give NAME=V1,V2,... items (a tuple of strings), or a dict of "
        "each setting's values"
    )


def _parsed(sweep: tuple[str, ...]) -> list[tuple[str, tuple[float, ...]]]:
    """`--sweep`'s items as (setting, its values); a bad one is a UsageError."""
    parsed = []
    for item in sweep:
        name, _, values = item.partition("=")
        name = name.strip().lstrip("-").replace("-", "_")
        if name not in SWEEPABLE:
            raise UsageError(
                f"--sweep {item}: PPO sweeps {', '.join(SWEEPABLE)} (settings that change "
                "no shape), as NAME=V1,V2,..."
            )
        try:
            numbers = tuple(float(v) for v in values.split(",") if v.strip())
        except ValueError:
            numbers = ()
        if not numbers:
            raise UsageError(f"--sweep {item}: give its values as {name}=V1,V2,... (numbers)")
        if len(set(numbers)) < len(numbers):
            # two agents of one setting and seed would be one agent twice over
            raise UsageError(f"--sweep {item}: a value is given twice; give each once")
        parsed.append((name, numbers))
    return parsed


__all__ = ["SWEEPABLE", "PPOConfig", "lag_unused"]
