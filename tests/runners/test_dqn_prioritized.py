"""DQN with prioritized replay (`--prioritized`): learns a cue in async mode (Ape-X:
actor priorities and per-actor epsilons, beside the learner's prioritized sampling,
importance weights and priority updates, which serial and sync runs share), and its
priorities survive a checkpoint and resume."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from pararl import DQNConfig, train
from tests.runners.saved import final_state
from tests.runners.test_dqn import SMALL
from tests.runners.test_multi_input import DQN_CUE, READ, SMALL_IMAGE


def test_prioritized_dqn_learns(tmp_path: Path) -> None:
    """Async, on the count cue (`pararl/DictCue-v0`): every step of an episode answered
    (seeds 0-2: 16 of 16 after 1,024-1,280 steps), where the untrained network gets
    4.5-8.5 (3 seeds, 8 evaluations each, no update)."""
    config = dataclasses.replace(
        DQN_CUE, env="pararl/DictCue-v0", env_kwargs={"cue_in": "count", **SMALL_IMAGE},
        mode="async", prioritized=True, total_steps=6_000, run_dir=tmp_path,
    )  # fmt: skip
    session = train(config)
    assert session.best_eval >= READ, f"prioritized DQN async: best {session.best_eval}"


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
