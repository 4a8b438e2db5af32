"""Kinds of env and the config fields whose defaults depend on them.

A run's kind of env comes from its spaces (`env_kind`); each config's `BY_KIND` table
(`pararl.config`) gives, per kind, the values of the fields left unset, and
`settings_of` reads them back, all set, as one frozen record whose fields are the
table's own (no list of them is kept anywhere else).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import gymnasium as gym

from pararl.errors import UsageError
from pararl.images import default_model

EnvKind = Literal["discrete", "continuous", "image", "minatar"]
ModelChoice = Literal["auto", "mlp", "nature-cnn", "minatar-cnn", "multi-input"]

KIND_TEXT: dict[EnvKind, str] = {
    "discrete": "discrete actions",
    "continuous": "continuous actions",
    "image": "Atari-sized images",
    "minatar": "MinAtar-sized images",
}


def env_kind(observation_space: gym.Space, action_space: gym.Space) -> EnvKind:
    """The kind of env that picks a config's defaults (`RunConfig.BY_KIND`): images
    by their size (`images.default_model`: Atari-sized frames or MinAtar-sized planes),
    other envs, Dict, Tuple and Discrete observations among them, by their action space
    (Discrete, MultiDiscrete and MultiBinary ones are discrete)."""
    model = default_model(observation_space)
    if model in ("nature-cnn", "minatar-cnn"):
        return "image" if model == "nature-cnn" else "minatar"
    discrete = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
    return "discrete" if isinstance(action_space, discrete) else "continuous"


def settings_of(config: Any) -> Any:
    """The fields of `config` whose defaults depend on the kind of env (those its
    `BY_KIND` rows fill, beyond the budget and intervals every run has), all set, as
    one frozen record (`<Algo>Settings`, made once from the config class's own table)."""
    cls = settings_class(type(config))
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(cls)}
    unset = [name for name, value in values.items() if value in (None, "auto")]
    if unset:
        raise UsageError(
            f"{type(config).__name__}: {', '.join(unset)} not set; call config.for_env(kind) first"
        )
    return cls(**values)


_SETTINGS: dict[type, type] = {}


def settings_class(config_cls: type) -> type:
    """The frozen record of `config_cls`'s kind-dependent fields, in field order (made
    once per config class)."""
    if config_cls in _SETTINGS:
        return _SETTINGS[config_cls]
    run = next(c for c in reversed(config_cls.__mro__) if "BY_KIND" in vars(c))
    every_run = {name for row in run.BY_KIND.values() for name in row}  # type: ignore[attr-defined]
    by_kind = {name for row in config_cls.BY_KIND.values() for name in row}  # type: ignore[attr-defined]
    names = [
        f.name
        for f in dataclasses.fields(config_cls)
        if f.name in by_kind and f.name not in every_run
    ]
    name = config_cls.__name__.removesuffix("Config") + "Settings"
    made = dataclasses.make_dataclass(name, [(n, Any) for n in names], frozen=True)
    _SETTINGS[config_cls] = made
    return made


__all__ = ["KIND_TEXT", "EnvKind", "ModelChoice", "env_kind", "settings_class", "settings_of"]
