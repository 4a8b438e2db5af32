"""The options of `pararl evaluate` (`pararl.playback` runs it): listing them
(`--help`) imports neither torch nor the checkpoint loader."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro


@dataclass
class EvaluateConfig:
    """`pararl evaluate RUN_DIR`: a saved run's return, shown or recorded."""

    run_dir: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    """Directory of a pararl training run."""
    episodes: int = 10
    """Episodes to run (MAML runs: episodes per task and adaptation step)."""
    checkpoint: str = "best"
    """Checkpoint name in RUN_DIR/checkpoints (best, final, interrupted, latest, step_N)."""
    agent: int | None = None
    """A run of several agents (`--seeds`): which one, 0 to N-1 (required there)."""
    seed: int = 12_345
    """Seed of the evaluation envs."""
    render: bool = False
    """Show the episodes on screen (needs a display)."""
    video: Path | None = None
    """Record the first episode to this file (.gif or .mp4), at the env's frame rate."""
    max_steps: int | None = None
    """Longest episode, in env steps: one still running then is cut and reported as
    truncated. Default: the run's evaluation cap (`--eval-max-steps` of training)."""
    actions: Literal["run", "greedy", "sampled"] = "run"
    """How the policy acts: `greedy`, `sampled` (from the policy: PPO, SAC, TD3 with
    its exploration noise; DQN epsilon-greedy with its final epsilon), or as the run's
    evaluations did (`run`: its `--eval-actions`)."""
    tasks: int = 20
    """MAML runs: new tasks drawn from the env's task distribution to adapt to."""
    adapt_steps: int = 3
    """MAML runs: inner gradient steps, each from new episodes of the policy adapted so
    far; the return is reported before adaptation and after each step."""
    trust_checkpoint: bool = False
    """Load the checkpoint even where the weights-only loader refuses it, by
    unpickling it as pararl did before (a warning is printed), and import the env
    module the run names from the directories it names. Either runs code the run
    holds: only for a run whose source you trust, e.g. one trained with an earlier
    pararl version, or your own."""
    threads: int = 1
    """Torch threads for the policy (one is fastest for these small networks, and
    leaves the cores to a training run)."""


__all__ = ["EvaluateConfig"]
