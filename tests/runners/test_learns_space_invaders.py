"""A learning guard for images: pararl's PPO on MinAtar Space Invaders, 40,960 steps
with its MinAtar defaults, must end clearly above a random policy and near SB3's PPO
at the same budget. Measured with the same 100-episode sampled evaluation (sticky
actions as in training, `benchmarks.minatar_ab.evaluate`; results/notes-2026.md,
`minatar_ab_guard_40k`, both with the MinAtar entropy bonus of 0.03): a random policy
4.0; SB3's PPO 5.5-6.1 over 5 seeds (median 6.0); pararl's 5.6-6.0 (median 6.0). The
threshold, 5.0, sits between them: ~3 standard errors above random, below every SB3
seed. The run is serial, so it is the same run on every machine. The same run is
then evaluated and recorded from its run directory (MinAtar's frames, as drawn)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("minatar")

from benchmarks.minatar_ab import evaluate

from pararl import PPOConfig, checkpoint, load, playback, train
from pararl.algos.ppo import load_policy

ENV, BUDGET, EPISODES, THRESHOLD = "MinAtar/SpaceInvaders-v1", 40_960, 100, 5.0
NEVER = 10**12


@pytest.mark.slow
def test_ppo_learns_space_invaders_and_is_evaluated_and_recorded(
    tmp_path: Path, pararl: Any
) -> None:
    run = tmp_path / "run"
    cfg = PPOConfig(
        env=ENV, total_steps=BUDGET, seed=0, mode="serial", workers=2, envs_per_worker=4,
        eval_every=NEVER, checkpoint_every=NEVER, tensorboard=False, progress="none",
        run_dir=run,
        eval_in="inline",  # only the end-of-budget evaluation, after training: no child for it
    )  # fmt: skip
    session = train(cfg)
    assert session is not None
    resolved = json.loads((run / "config.json").read_text())
    assert resolved["model"] == "minatar-cnn"
    # MinAtar's small network acts and updates on one thread: on several, two runs side
    # by side on the same cores slowed each other down 6.6x (docs/guides/cores-and-threads.md)
    threads = resolved["resolved"]["learner_threads"], resolved["resolved"]["update_threads"]
    assert threads == (1, 1)
    model = load_policy(session.config, checkpoint.load(session.run.checkpoint("final")))  # type: ignore[arg-type]

    @torch.no_grad()
    def act(obs: np.ndarray, deterministic: bool) -> np.ndarray:
        return model.act_tensors(torch.as_tensor(obs), deterministic=deterministic)[0].numpy()

    @torch.no_grad()
    def probs(obs: np.ndarray) -> np.ndarray:
        return torch.softmax(model.actor(model._features(torch.as_tensor(obs))), -1).numpy()

    result = evaluate(act, probs, ENV, EPISODES, 777, greedy=False)
    assert result["mean"] >= THRESHOLD, result["returns"]

    pytest.importorskip("imageio", reason="the [video] extra is not installed")
    gif = tmp_path / "invaders.gif"
    done = pararl("evaluate", str(run), "--episodes", "2", "--video", str(gif))
    assert done.returncode == 0, done.stderr
    # the video is the first of those episodes, every step of it, as the env draws it
    import imageio.v2 as imageio

    _, drawn, _ = playback._play(load(run), 1, 12_345, "rgb_array", 27_000)
    recorded = imageio.mimread(gif)
    assert len(recorded) == len(drawn) > 1
    assert recorded[0].shape[:2] == drawn[0].shape[:2]
    np.testing.assert_array_equal(recorded[0][..., :3], drawn[0])  # a GIF of few colours
    assert any(not np.array_equal(a, b) for a, b in itertools.pairwise(recorded))
