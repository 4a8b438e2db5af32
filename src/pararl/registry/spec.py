"""What an algorithm declares, in one place (`Algorithm`): its name and config
class, how it trains (plans and runs), and how its checkpoints act.

A spec module imports only its config at the top (light: `pararl --help` lists every
algorithm without importing torch); what it trains and acts with is imported inside
its functions, when they run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pararl.config import EvaluateConfig, RunConfig

if TYPE_CHECKING:  # torch's side: imported only when a spec's functions run
    from torch import nn

    from pararl.runners.session import TrainSession

Evaluation = Callable[[EvaluateConfig, Callable[..., None]], dict[str, float]]


@dataclass(frozen=True)
class Algorithm:
    """One algorithm, as `pararl train NAME`, `pararl.train`, `pararl.load`,
    `pararl evaluate` and a run's `config.json` know it."""

    name: str  # `pararl train NAME`
    help: str  # its line in `pararl --help`
    config: type[RunConfig]
    # (config, **kwargs) -> the finished session (None on an averaging rank > 0)
    train: Callable[..., TrainSession | None]
    # (config, checkpoint) -> its network, which acts through `models.acting.Policy`
    policy: Callable[[Any, dict[str, Any]], nn.Module]
    # a `sampled` action's epsilon when the policy is a Q-network (the agent's)
    sampled_epsilon: Callable[[Any], float] = lambda config: 0.0
    # its own `pararl evaluate` (None: episodes of its policy)
    evaluation: Evaluation | None = None
    # (config, render_mode) -> its env as evaluated (None: the env factory's)
    make_env: Callable[[Any, str | None], Any] | None = None
    # (network, config, task, episodes, steps, seed) -> (the network adapted to the
    # task, the returns before and after each step): meta-RL
    adapt: Callable[..., Any] | None = None


__all__ = ["Algorithm", "Evaluation"]
