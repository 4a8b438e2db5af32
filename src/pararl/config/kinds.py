"""Kinds of env and the config fields whose defaults depend on them.

A run's kind of env comes from its spaces (`env_kind`); each config's `BY_KIND` table
(`pararl.config`) gives, per kind, the values of the fields left unset, and
`settings_of` reads them back, all set, as one frozen record per algorithm.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import gymnasium as gym

from pararl.errors import UsageError
from pararl.images import ModelName, default_model

EnvKind = Literal["discrete", "continuous", "image", "minatar"]
ModelChoice = Literal["auto", "mlp", "nature-cnn", "minatar-cnn"]
S = TypeVar("S")

KIND_TEXT: dict[EnvKind, str] = {
    "discrete": "discrete actions",
    "continuous": "continuous actions",
    "image": "Atari-sized images",
    "minatar": "MinAtar-sized images",
}


def env_kind(observation_space: gym.Space, action_space: gym.Space) -> EnvKind:
    """The kind of env that picks a config's defaults (`RunConfig.BY_KIND`): images
    by their size (`images.default_model`: Atari-sized frames or MinAtar-sized planes),
    other envs by their action space."""
    model = default_model(observation_space)
    if model != "mlp":
        return "image" if model == "nature-cnn" else "minatar"
    return "discrete" if isinstance(action_space, gym.spaces.Discrete) else "continuous"


def settings_of(config: Any, cls: type[S]) -> S:
    """`cls` (a frozen dataclass of kind-dependent fields) from `config`'s values."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unset = [name for name, value in values.items() if value in (None, "auto")]
    if unset:
        raise UsageError(
            f"{type(config).__name__}: {', '.join(unset)} not set; call config.for_env(kind) first"
        )
    return cls(**values)


@dataclass(frozen=True)
class DQNSettings:
    """The DQN fields whose defaults depend on the kind of env, all set."""

    lr: float
    gamma: float
    buffer_size: int
    batch_size: int
    learning_starts: int
    replay_ratio: float
    n_step: int
    double_dqn: bool
    target_update: int
    eps_end: float
    eps_decay_steps: int
    model: ModelName
    optimizer: Literal["adam", "rmsprop"]


@dataclass(frozen=True)
class PPOSettings:
    """The PPO fields whose defaults depend on the kind of env, all set."""

    num_steps: int
    lr: float
    gamma: float
    gae_lambda: float
    minibatch_size: int
    update_epochs: int
    clip_vloss: bool
    vf_coef: float
    norm_obs: bool
    norm_reward: bool
    clip_coef: float
    ent_coef: float
    model: ModelName


@dataclass(frozen=True)
class SACSettings:
    """The SAC fields whose defaults depend on the kind of env, all set."""

    lr: float
    gamma: float
    buffer_size: int
    batch_size: int
    learning_starts: int
    replay_ratio: float
    n_step: int
    tau: float


__all__ = [
    "KIND_TEXT",
    "DQNSettings",
    "EnvKind",
    "ModelChoice",
    "PPOSettings",
    "SACSettings",
    "env_kind",
    "settings_of",
]
