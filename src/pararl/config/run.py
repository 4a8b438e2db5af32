"""The fields every training run has (`RunConfig`), and a config filled in for its
kind of env (`Filled`).

Values derived from others are properties, never fields; each field's docstring is
its `--help` text. The algorithms' configs build on it (`config.dqn`, `config.ppo`,
`config.maml`). Fields whose default depends on the kind of env are None (or
`auto`) until `for_env` fills them in; what it returns, a `Filled`, is the only
kind of config the learners take, so no learner fills defaults again.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar, Union

import gymnasium as gym
from tyro.constructors import PrimitiveConstructorSpec

from pararl.config.env_kwargs import EnvKwargs, check_env_kwargs
from pararl.config.env_source import EnvArg, EnvFactory, env_source
from pararl.config.json_fields import NO_LIMIT, field_types
from pararl.config.kinds import EnvKind, env_kind, settings_of
from pararl.errors import UsageError
from pararl.images import is_multi_input

C = TypeVar("C", bound="RunConfig")

# `--env`: an id, parsed as the string it is (a factory is for Python only)
ENV_ID_ON_THE_COMMAND_LINE = PrimitiveConstructorSpec(
    nargs=1,
    metavar="ENV_ID",
    instance_from_str=lambda args: args[0],
    is_instance=lambda value: isinstance(value, str),
    str_from_instance=lambda value: [value],
)


@dataclass(frozen=True)
class Filled(Generic[C]):
    """A config with every field that depends on the kind of env set: what `for_env`
    returns, and what the learners are built from."""

    config: C
    kind: EnvKind  # the kind of env that picked the defaults
    defaults: dict[str, Any]  # the values filled in (fields the user left unset)
    tuned_for: str | None = None  # the env id whose own defaults (`BY_ENV`) were used


Check = tuple[bool, str]  # a condition, and the one-line error when it fails


def unset_or(value: Any, ok: Callable[[Any], bool]) -> bool:
    """A field left to its kind's default (None) passes; a given value must be `ok`."""
    return value is None or ok(value)


def raise_first(checks: Iterable[Check]) -> None:
    """The first failed check's message as a UsageError."""
    for ok, message in checks:
        if not ok:
            raise UsageError(message)


@dataclass
class RunConfig:
    """Fields every training run has."""

    env: Annotated[EnvArg, ENV_ID_ON_THE_COMMAND_LINE] = "CartPole-v1"
    """Gymnasium env id: any registered id, or `module:EnvId` to import `module` first
    (from the Python path or the working directory), as `gym.make` does. From Python
    also a factory that returns an env (called with `env_kwargs`), an env class or an
    `EnvSpec`."""
    env_kwargs: EnvKwargs = field(default_factory=dict)
    """Keyword arguments for the env's constructor, passed to `gym.make`: KEY=VALUE
    pairs (values read as JSON when they parse: `size=5 walls=[1,2] name=maze`) or
    one JSON object (`'{"size": 5}'`)."""
    wrapper: Literal["none", "cartpole-shaped"] = "none"
    """Reward wrapper for training envs: `cartpole-shaped` is the CartPole shaping of the
    multi-process DQN post (docs/design/sources.md; position and angle terms); evaluation
    always uses the true reward."""
    seed: int = 0
    """Random seed: every env, actor, replica, evaluation and network gets its own
    stream derived from it (`pararl.seeding`)."""
    total_steps: int | None = None
    """Budget of environment steps (transitions collected, all envs together).
    Default: by algorithm and kind of env (CartPole-sized runs 100,000; MuJoCo 1M; Atari
    10M), printed at start and saved in config.json."""
    target_return: float | None = None
    """Stop once the greedy evaluation mean reaches this (default: the env's
    `reward_threshold`, if it has one)."""
    workers: int | None = None
    """Worker/actor processes (default: physical cores available; async DQN keeps one
    core for the learner)."""
    envs_per_worker: int = 4
    """Envs each worker steps serially."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Learner device; `auto` picks CUDA when present. Acting is always on the CPU."""
    compile: Literal["auto", "on", "off"] = "auto"
    """The learner's gradient step: `off` runs it op by op; `on` compiles it with
    torch.compile (and records it as a CUDA graph on a GPU); `auto` records it as a CUDA
    graph on a GPU and runs it op by op on the CPU. The math is the same either way."""
    learner_threads: int = 0
    """Torch threads of the learning process. 0: pararl's choice: every core for a
    convolutional learner beside actor processes (async, Ray); otherwise one for
    networks under 1M parameters, and for larger ones the cores the workers leave
    (all of them where the workers wait while it learns); a learner on several drops
    to one while something else uses the cores. A count given here holds, so a
    seeded run repeats bit for bit."""
    run_dir: Path | None = None
    """Where config, metrics, checkpoints and plots go (default: runs/<algo>-<env>-<time>)."""
    resume: Path | None = None
    """Continue the run saved in this directory from its newest checkpoint, with its
    settings; run options (--total-steps, --eval-every, --workers, ...) may change,
    the others may not."""
    trust_checkpoint: bool = False
    """With --resume: load the run's checkpoints even where the weights-only loader
    refuses them, by unpickling them as pararl did before (a warning is printed), and
    import the env module the run names from the directories it names. Either runs
    code the run holds: only for a run whose source you trust, e.g. one trained with
    an earlier pararl version, or your own."""
    eval_every: int | None = None
    """Evaluate the greedy policy every this many env steps. Default: by algorithm
    and kind of env (e.g. 2,500 on CartPole; Atari-sized images 50,000, MinAtar
    10,000: their episodes are longer), printed at start."""
    eval_episodes: int = 20
    """Episodes per evaluation (run in parallel as a vector of envs)."""
    eval_max_steps: int | None = None
    """Longest evaluation episode, in env steps: one still running then is cut and
    reported as truncated (its return so far counts). Default: the env's own
    `max_episode_steps`, else 27,000 (an Atari game's 108,000 frames at frame skip 4)."""
    eval_actions: Literal["greedy", "sampled"] = "greedy"
    """How evaluations act: `greedy` (the most likely action, the Gaussian's mean) or
    `sampled` from the policy (PPO and SAC), as rl-zoo evaluates Atari PPO agents: a
    greedy image policy can get stuck where sampling plays on. Evaluations pick `best`."""
    eval_in: Literal["auto", "process", "inline"] = "auto"
    """Where evaluations run: `process` (a child process, overlapped with training;
    the default with more than one core) or `inline` (in the training loop)."""
    checkpoint_every: int | None = None
    """Save a periodic checkpoint, step_N, every this many env steps, and one at a new
    run's first log tick (so that any run can be resumed, even one killed early); all
    are kept (best and final are always saved). Default: by algorithm and kind of env (e.g.
    25,000 on CartPole; Atari-sized images 500,000, MinAtar 250,000: a Nature-CNN DQN
    checkpoint is 27 MB), printed at start."""
    checkpoint_every_s: float = 300.0
    """Also save the periodic checkpoint `latest` every this many seconds (replaced
    each time), so that a run killed outright loses at most this much."""
    log_every_s: float = 2.0
    """Seconds between log lines / progress updates."""
    progress: Literal["auto", "bar", "plain", "none"] = "auto"
    """Console output: a progress bar on a terminal, plain log lines otherwise."""
    tensorboard: bool = True
    """Write TensorBoard event files to the run directory."""
    backend: Literal["local", "ray"] = "local"
    """Where actors run: `local` processes on this machine, or `ray` actors spread over
    a Ray cluster (`pip install 'pararl[ray]'`; `--workers` then counts Ray actors)."""
    ray_address: str | None = None
    """Ray cluster to join: `auto` (started with `ray start`) or HOST:PORT; default:
    start a Ray instance on this machine with its cores."""
    ray_timeout_s: float = 300.0
    """Ray: stop with an error when no actor has delivered anything for this long."""

    # Whether the number of envs (workers x envs per worker) is part of what the run
    # learns with (an on-policy batch), so that a resumed run keeps it (`runners.resume`)
    ENVS_SET_THE_BATCH: ClassVar[bool] = False

    # Options that set the step budget as --total-steps does (MAML's meta-iterations):
    # they may change on resume, and given without --total-steps they set it anew
    BUDGET_OPTIONS: ClassVar[tuple[str, ...]] = ()

    # Defaults that depend on the kind of env: fields left None are filled from this
    # table by `for_env` once the env's spaces are known (one row per kind).
    BY_KIND: ClassVar[dict[EnvKind, dict[str, Any]]] = {
        "discrete": {"total_steps": 100_000, "eval_every": 2_500, "checkpoint_every": 25_000},
        "continuous": {"total_steps": 100_000, "eval_every": 2_500, "checkpoint_every": 25_000},
        "image": {"total_steps": 10_000_000, "eval_every": 50_000, "checkpoint_every": 500_000},
        "minatar": {"total_steps": 5_000_000, "eval_every": 10_000, "checkpoint_every": 250_000},
    }
    # Defaults tuned for one env id, over its kind's (rl-zoo keeps its settings per env
    # id): a field left None takes its env's value first, then its kind's.
    BY_ENV: ClassVar[dict[str, dict[str, Any]]] = {}

    @property
    def eval_interval(self) -> int:
        """`eval_every`, once filled in (`for_env`)."""
        if self.eval_every is None:
            raise UsageError("eval_every not set; call config.for_env(kind) first")
        return self.eval_every

    @property
    def checkpoint_interval(self) -> int:
        """`checkpoint_every`, once filled in (`for_env`)."""
        if self.checkpoint_every is None:
            raise UsageError("checkpoint_every not set; call config.for_env(kind) first")
        return self.checkpoint_every

    @property
    def settings(self) -> Any:
        """The fields whose defaults depend on the kind of env, all set (a frozen
        record made from `BY_KIND`'s own names: `kinds.settings_of`), once filled in
        (`for_env`)."""
        return settings_of(self)

    @property
    def budget(self) -> int:
        """`total_steps`, once filled in (`for_env`)."""
        if self.total_steps is None:
            raise UsageError("total_steps not set; call config.for_env(kind) first")
        return self.total_steps

    @property
    def env_name(self) -> str:
        """How the run names its env: the id, or a factory's name (`EnvFactory`)."""
        return str(self.env)

    def for_env(self: C, kind: EnvKind, env_id: str | None = None) -> Filled[C]:
        """This config with its None (or `auto`) fields set from `BY_ENV[env id]`, then
        `BY_KIND[kind]`, with the values that were filled in (to print). `env_id`: the
        id whose own defaults apply (default: the config's; a factory's env: the id it
        was made from, if any)."""
        if env_id is None and not isinstance(self.env, EnvFactory):
            env_id = self.env_name
        env_id = (env_id or "").rsplit(":", 1)[-1]  # `module:EnvId` names EnvId
        tuned = self.BY_ENV.get(env_id, {})
        filled = {
            name: value
            for name, value in {**self.BY_KIND.get(kind, {}), **tuned}.items()
            if getattr(self, name) in (None, "auto")
        }
        used = any(name in filled for name in tuned)
        return Filled(replace(self, **filled), kind, filled, env_id if used else None)

    def for_spaces(
        self: C, observation_space: gym.Space, action_space: gym.Space, env_id: str | None = None
    ) -> Filled[C]:
        """`for_env` for the kind of env these spaces are (`kinds.env_kind`). A kind's
        `model` is the one for its observations; Dict, Tuple, Discrete and MultiDiscrete
        observations, whatever the kind, take the multi-input encoder (`--model auto`)."""
        filled = self.for_env(env_kind(observation_space, action_space), env_id)
        if "model" not in filled.defaults or not is_multi_input(observation_space):
            return filled
        defaults = {**filled.defaults, "model": "multi-input"}
        multi: dict[str, Any] = {"model": "multi-input"}  # a field of the configs that have it
        config = replace(filled.config, **multi)
        return replace(filled, config=config, defaults=defaults)

    def __post_init__(self) -> None:
        # an id, or an `EnvFactory`; anything else is refused here, in one line
        self.env, self.env_kwargs = env_source(self.env, self.env_kwargs)
        # from Python, `PPOConfig(run_dir="runs/x")` is as natural as a Path
        for name in ("run_dir", "resume"):
            value = getattr(self, name)
            if isinstance(value, str):
                setattr(self, name, Path(value))

    def unused(self) -> frozenset[str]:
        """Settings filled in by the env's kind that this run leaves unused (the
        start-up line of defaults leaves them out). None here."""
        return frozenset()

    def check_given(self, given: Iterable[str], typed: bool = True) -> None:
        """Options that clash only when both were given (`given`: the fields set by the
        user; `typed`: on the command line, else those of a config from Python that
        differ from the defaults), for a new run: a UsageError line for the first.
        None here."""

    def _check_choices(self) -> None:
        """A field of a few choices holds one of them (the command line checks its
        own; a config made in Python is checked here, before a run is saved with a
        value nothing could read back)."""
        for name, hint in field_types(type(self)).items():
            value = getattr(self, name)
            union = typing.get_origin(hint) in (Union, types.UnionType)
            arms = typing.get_args(hint) if union else (hint,)
            if value is None and type(None) in arms:
                continue
            choices = [
                c for a in arms if typing.get_origin(a) is Literal for c in typing.get_args(a)
            ]
            if choices and value not in choices:
                raise UsageError(
                    f"--{name.replace('_', '-')} must be one of "
                    f"{', '.join(map(str, choices))}, not {value!r}"
                )

    def validate(self) -> None:
        """Each value in its range, alone and with the others: the first that is not
        as one UsageError line. Values only, so that a saved run's config reads back
        on any machine; what a machine lacks (Ray) is said when a run starts there."""
        self._check_choices()
        checks = [
            (self.seed >= 0, "--seed must be >= 0 (seeds are non-negative integers)"),
            (self.total_steps is None or self.total_steps > 0, "--total-steps must be > 0"),
            (
                self.envs_per_worker is None or self.envs_per_worker >= 1,
                "--envs-per-worker must be >= 1",
            ),
            (self.workers is None or self.workers >= 1, "--workers must be >= 1"),
            (self.learner_threads >= 0, "--learner-threads must be >= 0 (0: pararl's choice)"),
            (self.eval_every is None or self.eval_every > 0, "--eval-every must be > 0"),
            (self.eval_episodes >= 1, "--eval-episodes must be >= 1"),
            (
                self.checkpoint_every is None or self.checkpoint_every > 0,
                "--checkpoint-every must be > 0",
            ),
            (self.checkpoint_every_s > 0, "--checkpoint-every-s must be > 0"),
            (
                self.eval_max_steps is None or self.eval_max_steps >= 1,
                "--eval-max-steps must be >= 1",
            ),
            (self.ray_timeout_s > 0, "--ray-timeout-s must be > 0"),
            (
                self.ray_address is None or self.backend == "ray",
                "--ray-address needs --backend ray",
            ),
        ]
        raise_first(checks)
        raise_first(
            (False, f"--{f.name.replace('_', '-')} must be a finite number, not {value}")
            for f in fields(self)
            if isinstance(value := getattr(self, f.name), float)
            and not math.isfinite(value)
            and (f.name not in NO_LIMIT or math.isnan(value))
        )
        problem = check_env_kwargs(self.env_kwargs)
        if problem is not None:
            raise UsageError(problem)


def configs() -> dict[str, type[RunConfig]]:
    """Every algorithm's config class (each subclass of `RunConfig` in this package) by
    its name, the name `config.json` keeps (`config.saved`). A subclass defined
    elsewhere (a test's, a user's) never stands in for one of them."""
    found: dict[str, type[RunConfig]] = {}
    todo = list(RunConfig.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if not cls.__module__.startswith("pararl.config."):
            continue
        if found.setdefault(cls.__name__, cls) is not cls:
            raise TypeError(f"two algorithm configs are named {cls.__name__}")
    return found


__all__ = ["Filled", "RunConfig", "configs"]
