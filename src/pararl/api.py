"""The Python entry point: `from pararl import train, DQNConfig` (re-exported lazily)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from pararl.config import RunConfig
from pararl.evaluation.child import EvalChild
from pararl.registry import algorithm_of

if TYPE_CHECKING:
    from pararl.runners.session import TrainSession


def train(
    config: RunConfig, eval_child: EvalChild | None = None, given: Collection[str] | None = None
) -> TrainSession | None:
    """Train the algorithm `config` describes; returns the finished session
    (`session.run.root` is the run directory, `session.best_eval` the best greedy
    evaluation). None only on a torchrun rank other than 0 of DQN `--mode averaging`,
    which owns no run. `eval_child`: an evaluation process started earlier (the
    command line starts one before it imports torch); taken over, or closed.
    `given`: the options the user set (default: those that differ from the defaults;
    with `resume`, only they may change, `pararl.runners.resume`). Raises
    `pararl.errors.RunFinished` when a resumed run has nothing left to do."""
    algo = algorithm_of(config)
    session: TrainSession | None = algo.train(config, eval_child=eval_child, given=given)
    return session
