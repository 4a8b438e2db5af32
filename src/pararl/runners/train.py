"""The training entry of each algorithm, as the registry names them: DQN (one
learner over any sampler, or replicas that average), SAC (the same off-policy
engine), PPO and MAML."""

from __future__ import annotations

from typing import Any

from pararl.algos.dqn import check_spaces as dqn_spaces
from pararl.algos.maml import check_spaces as maml_spaces
from pararl.algos.ppo import check_spaces as ppo_spaces
from pararl.algos.sac import check_spaces as sac_spaces
from pararl.config import DQNConfig, MAMLConfig, PPOConfig, SACConfig
from pararl.runners import averaging, dqn, maml, ppo, sac
from pararl.runners.session import TrainSession
from pararl.runners.setup import compose


def train_dqn(config: DQNConfig, **kwargs: Any) -> TrainSession | None:
    """Train DQN as configured; returns the finished session (run dir, results), or
    None on a torchrun rank other than 0 of `--mode averaging` (it owns no run)."""
    if averaging.uses_averaging(config):
        return averaging.train_averaging(config, **kwargs)
    return compose(config, "dqn", dqn_spaces, dqn.plan, **kwargs)


def train_sac(config: SACConfig, **kwargs: Any) -> TrainSession:
    """Train SAC as configured; returns the finished session."""
    return compose(config, "sac", sac_spaces, sac.plan, **kwargs)


def train_ppo(config: PPOConfig, **kwargs: Any) -> TrainSession:
    """Train PPO as configured; returns the finished session."""
    return compose(config, "ppo", ppo_spaces, ppo.plan, **kwargs)


def train_maml(config: MAMLConfig, **kwargs: Any) -> TrainSession:
    """Meta-train MAML-TRPO as configured; returns the finished session."""
    return compose(config, "maml", maml_spaces, maml.plan, **kwargs)


__all__ = ["train_dqn", "train_maml", "train_ppo", "train_sac"]
