"""The algorithms pararl trains, by name: the one table that the command line,
`--resume`, `pararl.train` and `pararl evaluate` read. Adding an algorithm is a
config class (`pararl.config`), a training entry, a greedy-policy loader and one
row here.

It sits above the runners and the algorithms and imports them like any module
does, but inside the functions of each row: listing the commands (`pararl --help`)
imports the configs only, not torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pararl.config import DQNConfig, EvaluateConfig, MAMLConfig, PPOConfig, RunConfig, SACConfig
from pararl.config.saved import saved_config
from pararl.errors import UsageError

Evaluation = Callable[[EvaluateConfig, Callable[..., None]], dict[str, float]]


@dataclass(frozen=True)
class Algorithm:
    name: str  # `pararl train NAME`
    help: str
    config: type[RunConfig]
    train: Callable[..., Any]  # (config, **kwargs) -> TrainSession | None
    greedy_policy: Callable[[Any, dict[str, Any]], Any]  # (config, checkpoint) -> policy
    evaluation: Evaluation | None = None  # its own `pararl evaluate` (None: greedy return)


def _train_dqn(config: DQNConfig, **kwargs: Any) -> Any:
    from pararl.runners.train import train_dqn

    return train_dqn(config, **kwargs)


def _train_sac(config: SACConfig, **kwargs: Any) -> Any:
    from pararl.runners.train import train_sac

    return train_sac(config, **kwargs)


def _train_ppo(config: PPOConfig, **kwargs: Any) -> Any:
    from pararl.runners.train import train_ppo

    return train_ppo(config, **kwargs)


def _train_maml(config: MAMLConfig, **kwargs: Any) -> Any:
    from pararl.runners.train import train_maml

    return train_maml(config, **kwargs)


def _dqn_policy(config: DQNConfig, state: dict[str, Any]) -> Any:
    from pararl.algos.dqn import greedy_policy

    return greedy_policy(config, state)


def _sac_policy(config: SACConfig, state: dict[str, Any]) -> Any:
    from pararl.algos.sac import greedy_policy

    return greedy_policy(config, state)


def _ppo_policy(config: PPOConfig, state: dict[str, Any]) -> Any:
    from pararl.algos.ppo import greedy_policy

    return greedy_policy(config, state)


def _maml_policy(config: MAMLConfig, state: dict[str, Any]) -> Any:
    from pararl.algos.maml import greedy_policy

    return greedy_policy(config, state)


def _maml_evaluation(cfg: EvaluateConfig, write_video: Callable[..., None]) -> dict[str, float]:
    from pararl.runners.maml_eval import run

    return run(cfg, write_video)


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("dqn", "train DQN (actors + learner)", DQNConfig, _train_dqn, _dqn_policy),
        Algorithm(
            "sac",
            "train SAC for continuous actions (actors + learner)",
            SACConfig,
            _train_sac,
            _sac_policy,
        ),
        Algorithm("ppo", "train PPO (batched env workers)", PPOConfig, _train_ppo, _ppo_policy),
        Algorithm(
            "maml",
            "meta-train MAML-TRPO (multi-task sampler)",
            MAMLConfig,
            _train_maml,
            _maml_policy,
            _maml_evaluation,
        ),
    )
}


def algorithm_of(config: RunConfig) -> Algorithm:
    for algo in ALGORITHMS.values():
        if type(config) is algo.config:
            return algo
    raise UsageError(f"no algorithm trains a {type(config).__name__}")


def algorithm_of_run(run_dir: Path) -> Algorithm:
    """The algorithm of the run saved in `run_dir` (from its config.json)."""
    return algorithm_of(saved_config(run_dir))


__all__ = ["ALGORITHMS", "Algorithm", "algorithm_of", "algorithm_of_run"]
