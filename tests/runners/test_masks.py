"""Action masks end to end. The masked envs (`pararl.envs.fake`) raise on an action
outside their mask, so a run that finishes never gave one to `step`: PPO and DQN, in
this process and with worker or actor processes, with their evaluations (inline and
in the evaluation child), `pararl.load(run).act()`, `pararl evaluate` and playback."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pararl
from pararl import DQNConfig, PPOConfig, load, train
from pararl.errors import UsageError
from pararl.playback import _play

QUIET: dict[str, Any] = dict(
    tensorboard=False,
    progress="none",
    eval_in="inline",
    checkpoint_every=100_000,
    seed=0,
    hidden=(32,),
)
PPO: dict[str, Any] = dict(
    total_steps=1_024, num_envs=4, num_steps=32, minibatch_size=64, eval_every=512, eval_episodes=4
)
DQN: dict[str, Any] = dict(
    total_steps=1_500,
    learning_starts=200,
    envs_per_worker=4,
    batch_size=32,
    eval_every=500,
    eval_episodes=4,
    eps_start=1.0,  # uniform actions for most of the run: legal ones only
)


def evals(run_dir: Path) -> list[float]:
    with (run_dir / "eval.csv").open() as f:
        return [float(row["eval_return"]) for row in csv.DictReader(f)]


def play_agent(run_dir: Path, episodes: int = 3) -> None:
    """`load().act()` through whole episodes of the run's env, greedy and sampled,
    one observation at a time and as a batch of one (the env raises on an illegal
    action); without the mask, the agent asks for it."""
    agent = load(run_dir)
    env = agent.make_env()
    try:
        for episode in range(episodes):
            obs, info = env.reset(seed=episode)
            with pytest.raises(UsageError, match="action_mask=info"):
                agent.act(obs)
            done, step = False, 0
            while not done:
                mask = info["action_mask"]
                if step % 2:
                    action = agent.act(obs, deterministic=episode % 2 == 0, action_mask=mask)
                else:
                    action = agent.act(obs[None], False, mask[None])[0]
                obs, _, terminated, truncated, info = env.step(action)
                done, step = terminated or truncated, step + 1
    finally:
        env.close()


def assert_ppo_never_stepped_an_illegal_action(run_dir: Path) -> None:
    """A finished PPO run (its two evaluations, inline), then its agent through
    `load().act()`, `pararl.evaluate` and playback, on the env that raises."""
    assert len(evals(run_dir)) == 2
    play_agent(run_dir)
    result = pararl.evaluate(run_dir, episodes=3, actions="sampled")
    assert result["episodes"] == 3
    agent = load(run_dir)
    _play(agent, 2, 0, "human", 50)  # playback's loop (no frames asked for)


@pytest.mark.parametrize(
    ("env", "mode"),
    [
        # MaskedChoice-v0 in this process: the run that learns, below
        ("pararl/MaskedChoice-v0", "sync"),
        ("pararl/MaskedChoiceInfo-v0", "serial"),  # the mask in the info, not a method
        ("pararl/MaskedMultiDiscrete-v0", "sync"),  # a mask per dimension
    ],
)
def test_ppo_never_steps_an_illegal_action(env: str, mode: str, tmp_path: Path) -> None:
    workers = 2 if mode == "sync" else 1
    train(PPOConfig(env=env, run_dir=tmp_path, mode=mode, workers=workers, **PPO, **QUIET))
    assert_ppo_never_stepped_an_illegal_action(tmp_path)


def test_a_masked_ppo_run_learns_its_task(tmp_path: Path) -> None:
    """The highest legal action pays: within the mask a policy learns it (a random
    legal choice gets about half); in this process, it never steps an illegal action."""
    config = PPOConfig(
        env="pararl/MaskedChoice-v0", run_dir=tmp_path, mode="serial", workers=1, **PPO, **QUIET
    )
    train(config)
    assert evals(tmp_path)[-1] >= 9.0  # of 10
    assert_ppo_never_stepped_an_illegal_action(tmp_path)


@pytest.mark.parametrize("mode", ["serial", "sync", "async"])
def test_dqn_never_steps_an_illegal_action(mode: str, tmp_path: Path) -> None:
    train(
        DQNConfig(
            env="pararl/MaskedChoice-v0", run_dir=tmp_path, mode=mode, workers=1, **DQN, **QUIET
        )
    )
    assert len(evals(tmp_path)) == 3
    play_agent(tmp_path)
    state = pararl.checkpoint.load(tmp_path / "checkpoints" / "final.pt")
    assert state["action_masks"] is True


def test_dqn_with_prioritized_apex_replay_keeps_the_masks(tmp_path: Path) -> None:
    """Ape-X actors (prioritized replay, first priorities from the actor's own Q copy
    with the next masks) and a resumed run's replay memory with its masks."""
    config = DQNConfig(
        env="pararl/MaskedChoiceInfo-v0",
        run_dir=tmp_path,
        mode="async",
        workers=1,
        prioritized=True,
        **{**DQN, "total_steps": 1_000},
        **QUIET,
    )
    train(config)
    from tests.runners.saved import final_state

    replay = final_state(tmp_path)["replay"]["memory"]
    assert replay["next_mask"].shape == (len(replay["action"]), 4)
    assert replay["next_mask"].any(axis=1).all()
    train(DQNConfig(resume=str(tmp_path), total_steps=1_500))
    assert len(evals(tmp_path)) >= 3


@pytest.mark.eval_child
def test_the_evaluation_child_acts_within_the_masks(tmp_path: Path) -> None:
    """Actor processes (`--mode async`) and the evaluation child, sampling."""
    train(
        PPOConfig(
            env="pararl/MaskedChoice-v0",
            run_dir=tmp_path,
            mode="async",
            **{**PPO, **QUIET, "eval_in": "process", "eval_actions": "sampled"},
        )
    )
    facts = (tmp_path / "config.json").read_text()
    assert '"eval_in": "process"' in facts
    assert len(evals(tmp_path)) == 2


def test_an_env_without_masks_trains_as_before(tmp_path: Path) -> None:
    """No masks: nothing about them in the rollout or the checkpoint."""
    config = {**PPO, **QUIET, "total_steps": 256, "mode": "serial"}
    train(PPOConfig(env="CartPole-v1", run_dir=tmp_path, **config))
    state = pararl.checkpoint.load(tmp_path / "checkpoints" / "final.pt")
    assert state["action_masks"] is False
    assert state["action_head"] == {"kind": "Categorical", "n": 2}
    agent = load(tmp_path)
    assert agent.act(np.zeros(4, np.float32)) in (0, 1)
