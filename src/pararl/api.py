"""The Python entry point: `from pararl import train, DQNConfig` (re-exported lazily)."""

from __future__ import annotations

from pararl.config import DQNConfig, PPOConfig, RunConfig
from pararl.errors import UsageError
from pararl.runners.session import TrainSession


def train(config: RunConfig) -> TrainSession | None:
    """Train the algorithm `config` describes; returns the finished session
    (`session.run.root` is the run directory, `session.best_eval` the best greedy
    evaluation). None only on a torchrun rank other than 0 of DQN `--mode averaging`,
    which owns no run."""
    if isinstance(config, DQNConfig):
        from pararl.runners.dqn import train_dqn

        return train_dqn(config)
    if isinstance(config, PPOConfig):
        from pararl.runners.ppo import train_ppo

        return train_ppo(config)
    raise UsageError(f"no trainer for {type(config).__name__}")
