"""DQN with prioritized replay (`--prioritized`): learns CartPole in async mode (Ape-X:
actor priorities and per-actor epsilons, beside the learner's prioritized sampling,
importance weights and priority updates, which serial and sync runs share), and its
priorities survive a checkpoint and resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pararl import DQNConfig, train
from tests.runners.saved import final_state
from tests.runners.test_dqn import SMALL
from tests.test_learns import COMMON, GOOD


@pytest.mark.slow
def test_prioritized_dqn_learns(tmp_path: Path) -> None:
    # the run stops once an evaluation reaches GOOD (~5k steps); the budget is slack
    # for a loaded machine, where async acting and evaluation fall behind
    options = {**COMMON, "mode": "async", "prioritized": True, "total_steps": 40_000}
    config = DQNConfig(run_dir=tmp_path, **options)  # type: ignore[arg-type]
    session = train(config)
    assert session is not None
    assert session.best_eval >= GOOD, f"prioritized DQN async: best {session.best_eval}"


def test_priorities_are_checkpointed_and_resumed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    train(DQNConfig(mode="serial", prioritized=True, run_dir=run, **SMALL))  # type: ignore[arg-type]
    first = final_state(run)["replay"]
    priorities = first["priorities"]
    stored = len(first["memory"]["action"])
    assert stored > 1_000  # an episode's reset step carries no transition
    assert len(np.unique(priorities[:stored])) > 100  # learned TD errors, not the initial max
    train(DQNConfig(resume=run, total_steps=2_400))
    second = final_state(run)["replay"]
    assert len(second["memory"]["action"]) > stored + 1_000
    assert second["max_priority"] >= first["max_priority"]
