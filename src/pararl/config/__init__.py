"""Run configurations, one package: the fields of every run (`run`), each
algorithm's config (one module each: `dqn`, `sac`, `td3`, `ppo`, `maml`, ...), the kinds
of env and the defaults they pick (`kinds`), the options of `pararl evaluate`
(`evaluate`) and of `pararl compare` (`compare`), and a run's saved `config.json`
(`saved`). Typed dataclasses whose field docstrings are the `--help`; light on purpose
(no torch): the command line lists and parses them.

Every module of this package is imported here, so that every algorithm's config is
known by its class name (`configs()`: what `config.json` names) without a list of them.
"""

import importlib
import pkgutil

from pararl.config.compare import CompareConfig
from pararl.config.dqn import DQNConfig
from pararl.config.evaluate import EvaluateConfig
from pararl.config.kinds import KIND_TEXT, EnvKind, ModelChoice, env_kind, settings_of
from pararl.config.maml import MAMLConfig
from pararl.config.ppo import PPOConfig
from pararl.config.run import Filled, RunConfig, configs
from pararl.config.sac import SACConfig
from pararl.config.saved import config_from_json, saved_config, to_json

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def __getattr__(name: str) -> type[RunConfig]:
    """Any algorithm's config by its class name (`pararl.config.TD3Config`)."""
    found = configs().get(name)
    if found is None:
        raise AttributeError(f"module 'pararl.config' has no attribute {name!r}")
    return found


__all__ = [
    "KIND_TEXT",
    "CompareConfig",
    "DQNConfig",
    "EnvKind",
    "EvaluateConfig",
    "Filled",
    "MAMLConfig",
    "ModelChoice",
    "PPOConfig",
    "RunConfig",
    "SACConfig",
    "config_from_json",
    "configs",
    "env_kind",
    "saved_config",
    "settings_of",
    "to_json",
]
