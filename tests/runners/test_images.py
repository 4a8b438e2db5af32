"""Training from images end to end: Atari frames through the Nature CNN (DQN and
PPO, a few hundred steps: the path runs, frames stay uint8, the choice is saved),
MinAtar's CNN for DQN, and a MinAtar PPO run evaluated and recorded from its run
directory. DQN learns from an image at all in tests/runners/test_multi_input.py; how
well DQN and PPO learn MinAtar is the benchmarks' (`python -m benchmarks minatar_ab`
against SB3's PPO, at 40,960 steps and 5 seeds in results/notes-2026.md,
`minatar_ab_guard_40k`; `python -m benchmarks seeds` for DQN)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pararl import PPOConfig, load, playback, train
from pararl.config import DQNConfig
from tests.runners.saved import final_state

pytestmark = pytest.mark.timeout(120)
# one short evaluation at the end: an untrained Breakout agent that never serves
# plays until the episode cap (27,000 steps by default)
QUIET = (
    "--progress", "plain", "--no-tensorboard", "--eval-in", "inline", "--eval-episodes", "1",
    "--eval-max-steps", "200",
)  # fmt: skip


# Mnih et al. 2015: three convolutions on 4 stacked 84x84 frames, then 512 units
NATURE_CNN = [(32, 4, 8, 8), (64, 32, 4, 4), (64, 64, 3, 3), (512, 64 * 7 * 7)]


def saved(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "config.json").read_text())


def weight_shapes(state_dict: dict[str, torch.Tensor]) -> list[tuple[int, ...]]:
    return [tuple(v.shape) for k, v in state_dict.items() if k.endswith("weight")]


def test_dqn_on_atari_frames_runs_with_the_nature_cnn(pararl: Any, tmp_path: Path) -> None:
    pytest.importorskip("ale_py", reason="the [atari] extra is not installed")
    run_dir = tmp_path / "dqn"
    result = pararl(
        *("train", "dqn", "--env", "ALE/Breakout-v5", "--total-steps", "64"),
        *("--learning-starts", "32", "--batch-size", "8", "--buffer-size", "512"),
        *("--mode", "serial", "--workers", "1", "--envs-per-worker", "2"),
        *("--eval-every", "100000", "--run-dir", str(run_dir), *QUIET),
    )
    assert result.returncode == 0, result.stderr
    assert "defaults for Atari-sized images" in result.stderr
    config = saved(run_dir)
    assert (config["model"], config["resolved"]["env_kind"]) == ("nature-cnn", "image")
    assert config["lr"] == 1e-4
    assert config["n_step"] == 1
    state = final_state(run_dir)
    q, q_target = state["learner"]["q"], state["learner"]["q_target"]
    assert weight_shapes(q) == [*NATURE_CNN, (4, 512)]  # Breakout's 4 actions
    # a quarter of an update per env step after the first 32, up to step 62: the last
    # vector step's update falls due after the budget is spent
    assert (state["env_steps"], state["learner"]["updates"]) == (64, int(0.25 * (62 - 32)))
    # the target net is still the initial one (copied every 250 updates): every
    # layer of the online net has moved from it
    assert all(not torch.equal(q[k], q_target[k]) for k in q)
    assert state["obs_dtype"] == "|u1"
    assert state["replay"]["kind"] == "frames"  # each frame once, as bytes
    assert state["replay"]["frames"].dtype == np.uint8
    assert state["replay"]["frames"].shape[1:] == (84, 84)


def test_ppo_on_atari_frames_runs_with_the_nature_cnn(pararl: Any, tmp_path: Path) -> None:
    pytest.importorskip("ale_py", reason="the [atari] extra is not installed")
    run_dir = tmp_path / "ppo"
    result = pararl(
        *("train", "ppo", "--env", "ALE/Breakout-v5", "--total-steps", "32"),
        *("--num-steps", "16", "--minibatch-size", "16", "--update-epochs", "1"),
        *("--mode", "serial", "--workers", "1", "--envs-per-worker", "2"),
        *("--eval-every", "100000", "--run-dir", str(run_dir), *QUIET),
    )
    assert result.returncode == 0, result.stderr
    config = saved(run_dir)
    assert (config["model"], config["clip_coef"], config["ent_coef"]) == ("nature-cnn", 0.1, 0.01)
    assert config["norm_obs"] is False
    state = final_state(run_dir)
    model = state["learner"]["model"]
    assert weight_shapes(model) == [*NATURE_CNN, (4, 512), (1, 512)]  # actor, critic
    assert state["obs_dtype"] == "|u1"
    # one rollout of 16 steps x 2 envs, one epoch of 2 minibatches of 16
    assert (state["env_steps"], state["learner"]["updates"]) == (32, 2)
    assert state["learner"]["optimizer"]["steps"] == 2


def test_dqn_on_minatar_takes_its_cnn(tmp_path: Path) -> None:
    pytest.importorskip("minatar", reason="the [minatar] extra is not installed")
    config = DQNConfig(
        env="MinAtar/Breakout-v1", seed=0, total_steps=256, mode="serial", workers=1,
        envs_per_worker=8, learning_starts=128, batch_size=16, eval_every=10**9,
        eval_in="inline", eval_episodes=1, eval_max_steps=100, progress="none",
        tensorboard=False, run_dir=tmp_path / "dqn",
    )  # fmt: skip
    train(config)
    assert saved(tmp_path / "dqn")["model"] == "minatar-cnn"
    state = final_state(tmp_path / "dqn")
    assert weight_shapes(state["learner"]["q"])[0] == (16, 4, 3, 3)  # 4 channels in
    assert state["learner"]["updates"] > 0


def test_ppo_on_minatar_acts_on_one_thread_and_is_evaluated_and_recorded(
    tmp_path: Path, pararl: Any
) -> None:
    """MinAtar's defaults (its CNN, one thread to act and update), then `pararl
    evaluate --video` from the run directory: the GIF is the first episode, every
    step of it, as the env draws it."""
    pytest.importorskip("minatar", reason="the [minatar] extra is not installed")
    pytest.importorskip("imageio", reason="the [video] extra is not installed")
    import imageio.v2 as imageio

    run = tmp_path / "run"
    train(
        PPOConfig(
            env="MinAtar/SpaceInvaders-v1", total_steps=512, num_steps=64, seed=0,
            mode="serial", workers=2, envs_per_worker=4, eval_every=10**12,
            checkpoint_every=10**12, tensorboard=False, progress="none", run_dir=run,
            eval_in="inline",
        )
    )  # fmt: skip
    resolved = saved(run)
    assert resolved["model"] == "minatar-cnn"
    # MinAtar's small network acts and updates on one thread: on several, two runs side
    # by side on the same cores slowed each other down 6.6x (docs/guides/cores-and-threads.md)
    threads = resolved["resolved"]["learner_threads"], resolved["resolved"]["update_threads"]
    assert threads == (1, 1)
    gif = tmp_path / "invaders.gif"
    done = pararl("evaluate", str(run), "--episodes", "2", "--video", str(gif))
    assert done.returncode == 0, done.stderr
    _, drawn, _ = playback._play(load(run), 1, 12_345, "rgb_array", 27_000)
    recorded = imageio.mimread(gif)
    assert len(recorded) == len(drawn) > 1
    assert recorded[0].shape[:2] == drawn[0].shape[:2]
    np.testing.assert_array_equal(recorded[0][..., :3], drawn[0])  # a GIF of few colours
    assert any(not np.array_equal(a, b) for a, b in itertools.pairwise(recorded))
