"""The algorithms pararl trains, by name: the one table that the command line,
`--resume`, `pararl.train` and `pararl evaluate` read. Adding an algorithm is a
config class, a training entry, a greedy-policy loader and one row here.

Light on purpose (no torch): `pararl --help` lists the commands from it. The
training entry and the policy loader are named as `module:function` and imported
on use.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pararl.config import DQNConfig, PPOConfig, RunConfig
from pararl.config_maml import MAMLConfig
from pararl.errors import UsageError


@dataclass(frozen=True)
class Algorithm:
    name: str  # `pararl train NAME`
    help: str
    config: type[RunConfig]
    trainer: str  # module:function(config, **kwargs) -> TrainSession | None
    policy: str  # module:function(config, checkpoint state) -> greedy network
    evaluate: str | None = None  # module:function(EvaluateConfig, write_video): own evaluate

    def train(self, config: RunConfig, **kwargs: Any) -> Any:
        return _load(self.trainer)(config, **kwargs)

    def greedy_policy(self, config: RunConfig, state: dict[str, Any]) -> Any:
        return _load(self.policy)(config, state)

    def evaluation(self) -> Any:
        """The algorithm's own `pararl evaluate` (None: the greedy return)."""
        return None if self.evaluate is None else _load(self.evaluate)


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm(
            "dqn",
            "train DQN (actors + learner)",
            DQNConfig,
            "pararl.runners.train:train_dqn",
            "pararl.algos.dqn:greedy_policy",
        ),
        Algorithm(
            "ppo",
            "train PPO (batched env workers)",
            PPOConfig,
            "pararl.runners.train:train_ppo",
            "pararl.algos.ppo:greedy_policy",
        ),
        Algorithm(
            "maml",
            "meta-train MAML-TRPO (multi-task sampler)",
            MAMLConfig,
            "pararl.runners.train:train_maml",
            "pararl.algos.maml:greedy_policy",
            "pararl.runners.maml_eval:run",
        ),
    )
}


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def algorithm_of(config: RunConfig) -> Algorithm:
    for algo in ALGORITHMS.values():
        if type(config) is algo.config:
            return algo
    raise UsageError(f"no algorithm trains a {type(config).__name__}")


def config_from_json(text: str) -> RunConfig:
    """A config saved by `config.to_json` (unknown keys, e.g. derived facts, are
    ignored)."""
    data = json.loads(text)
    saved = data.pop("algo", "")
    cls = next((a.config for a in ALGORITHMS.values() if a.config.__name__ == saved), None)
    if cls is None:
        raise UsageError("config.json names no known algorithm; is this a pararl run dir?")
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in names:
            continue
        if key in ("run_dir", "resume") and value is not None:
            value = Path(value)
        if key == "hidden":
            value = tuple(value)
        kwargs[key] = value
    return cls(**kwargs)


def algorithm_of_run(run_dir: Path) -> Algorithm:
    """The algorithm of the run saved in `run_dir` (from its config.json)."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise UsageError(f"{run_dir}: no config.json there; pass the directory of a pararl run")
    return algorithm_of(config_from_json(path.read_text()))


__all__ = ["ALGORITHMS", "Algorithm", "algorithm_of", "algorithm_of_run", "config_from_json"]
