"""The Python entry points, re-exported lazily by `pararl`: `train(config)`,
`load(run_dir)` (a trained agent, `pararl.agent`) and `evaluate(run_dir)` (what
`pararl evaluate` runs)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from pararl.agent import Agent, load
from pararl.config import EvaluateConfig, RunConfig
from pararl.config.env_source import EnvArg
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


def evaluate(
    run_dir: str | Path,
    episodes: int = 10,
    checkpoint: str = "best",
    seed: int = 12_345,
    video: str | Path | None = None,
    max_steps: int | None = None,
    env: EnvArg | None = None,
    **options: object,
) -> dict[str, float]:
    """`pararl evaluate RUN_DIR` from Python, the same code: the greedy return of a
    run's checkpoint over `episodes` episodes (printed, and returned as `mean`,
    `std`, `episodes`, `truncated`; MAML runs: the return before adaptation and after
    each step, `step_0`, `step_1`, ...). `video`: record the first episode to a .gif
    or .mp4. `env`: evaluate in this env instead of the run's (as `env=` of a config
    takes it; a run whose env a factory built needs its factory given again).
    `options`: the command's other options by name (`tasks`, `adapt_steps`,
    `render`, `threads`)."""
    from pararl import playback

    cfg = EvaluateConfig(
        Path(run_dir),
        episodes=episodes,
        checkpoint=checkpoint,
        seed=seed,
        video=None if video is None else Path(video),
        max_steps=max_steps,
        **options,  # type: ignore[arg-type]
    )
    return playback.run(cfg, env)


__all__ = ["Agent", "evaluate", "load", "train"]
