"""Run configurations, one package: the fields of every run (`run`), each
algorithm's config (`dqn`, `sac`, `ppo`, `maml`), the kinds of env and the defaults they
pick (`kinds`), the options of `pararl evaluate` (`evaluate`), and a run's saved
`config.json` (`saved`). Typed dataclasses whose field docstrings are the `--help`;
light on purpose (no torch): the command line lists and parses them."""

from pararl.config.dqn import DQNConfig
from pararl.config.evaluate import EvaluateConfig
from pararl.config.kinds import (
    KIND_TEXT,
    DQNSettings,
    EnvKind,
    ModelChoice,
    PPOSettings,
    SACSettings,
    env_kind,
    settings_of,
)
from pararl.config.maml import MAMLConfig
from pararl.config.ppo import PPOConfig
from pararl.config.run import Filled, RunConfig
from pararl.config.sac import SACConfig
from pararl.config.saved import config_from_json, saved_config, to_json

__all__ = [
    "KIND_TEXT",
    "DQNConfig",
    "DQNSettings",
    "EnvKind",
    "EvaluateConfig",
    "Filled",
    "MAMLConfig",
    "ModelChoice",
    "PPOConfig",
    "PPOSettings",
    "RunConfig",
    "SACConfig",
    "SACSettings",
    "config_from_json",
    "env_kind",
    "saved_config",
    "settings_of",
    "to_json",
]
