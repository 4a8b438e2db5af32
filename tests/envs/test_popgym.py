"""POPGym's partially observable tasks (the `popgym` extra) train by their `popgym:ID`
env ids: RepeatPreviousEasy shows a card as a Discrete value, which the multi-input
encoder reads one-hot under the recurrent core."""

from __future__ import annotations

from pathlib import Path

import pytest

from pararl import PPOConfig, checkpoint, evaluate, train

pytest.importorskip("popgym")


def test_a_recurrent_ppo_trains_on_a_popgym_task(tmp_path: Path) -> None:
    config = PPOConfig(
        env="popgym:popgym-RepeatPreviousEasy-v0", recurrent="gru", total_steps=512,
        mode="serial", run_dir=tmp_path, progress="none", tensorboard=False,
        eval_in="inline", eval_episodes=1, eval_every=512, num_envs=4, minibatch_size=64,
    )  # fmt: skip
    session = train(config)
    model = checkpoint.load(session.run.checkpoint("final"))["learner"]["model"]
    assert "core.rnn.weight_hh_l0" in model
    assert any(key.startswith("encoder.") for key in model)  # the card, one-hot
    result = evaluate(tmp_path, episodes=1)
    assert -1.0 <= result["mean"] <= 1.0  # the task's returns lie within [-1, 1]
