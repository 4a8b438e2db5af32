"""Does it learn at all? Every DQN mode (alone and batched) and every PPO mode, on
CartPole-v1 from a fixed seed, must reach a greedy return far above what the
untrained network scores within a small step budget; PPO must learn continuous
actions; a recurrent PPO must learn a task that needs memory, which the same PPO
without memory cannot. A learner that does not learn (no optimizer step, targets
never updated, weights never published to the actors) fails these. The runs stop at
the first evaluation that reaches the target. SAC and TD3 learn a cue in seconds
(tests/runners/test_multi_input.py, tests/runners/test_td3.py); how well each
algorithm learns control tasks is the benchmarks' (BENCHMARKS.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pararl import DQNConfig, PPOConfig, load, train
from tests.runners.population import rows
from tests.runners.test_multi_input import READ, SMALL_IMAGE

RANDOM_RETURN = 22.0
# DQN: the untrained Q-network of seed 0 scores 11-13 greedily (8 evaluations of 5
# episodes with the optimizer's step taken out); its runs get there in ~3,000 steps
GOOD = 150.0
# PPO: the untrained network of seed 0 scores 74-181 greedily (16 evaluations of 5
# episodes with the optimizer's step taken out: a random network can score 150 by
# luck); the serial and sync runs get to 432 at 6,144 steps, the async one to 500 at
# 1,024
LEARNED = 300.0

COMMON = dict(
    env="CartPole-v1",
    seed=0,
    workers=2,
    envs_per_worker=4,
    eval_every=1_000,
    eval_episodes=5,
    target_return=GOOD,
    tensorboard=False,
    progress="none",
    eval_in="inline",  # every evaluation where due: the outcome is the seed's alone
)


@pytest.mark.parametrize("mode", ["serial", "sync", "async"])
def test_dqn_learns(mode: str, tmp_path: Path) -> None:
    session = train(DQNConfig(mode=mode, total_steps=24_000, run_dir=tmp_path, **COMMON))  # type: ignore[arg-type]
    assert session is not None
    assert session.best_eval >= GOOD, f"DQN {mode}: best greedy return {session.best_eval}"


@pytest.mark.parametrize("mode", ["serial", "sync", "async"])
def test_ppo_learns(mode: str, tmp_path: Path) -> None:
    config = PPOConfig(mode=mode, total_steps=40_000, run_dir=tmp_path, **COMMON)  # type: ignore[arg-type]
    config.target_return = LEARNED
    session = train(config)
    assert session is not None
    assert session.best_eval >= LEARNED, f"PPO {mode}: best greedy return {session.best_eval}"


def test_only_a_recurrent_ppo_learns_a_task_that_needs_memory(tmp_path: Path) -> None:
    """RepeatPrevious: name the symbol shown one step before (most 1.0; a policy that
    sees only the present gets 0.0 in expectation, `envs.memory`). The LSTM policy
    learns it; the same PPO without one, given as many steps, stays at chance."""
    common = dict(
        COMMON, env="pararl/RepeatPrevious-v0", total_steps=6_144, eval_every=2_048,
        eval_episodes=10, target_return=0.95, mode="serial",
    )  # fmt: skip
    lstm = train(PPOConfig(recurrent="lstm", run_dir=tmp_path / "lstm", **common))  # type: ignore[arg-type]
    assert lstm.best_eval >= 0.95, f"LSTM: best greedy return {lstm.best_eval}"
    common["total_steps"] = load(tmp_path / "lstm", "final").env_steps
    flat = train(PPOConfig(run_dir=tmp_path / "mlp", **common))  # type: ignore[arg-type]
    assert flat.best_eval <= 0.5, f"MLP: best greedy return {flat.best_eval}"


def test_ppo_learns_continuous_actions(tmp_path: Path) -> None:
    """A Gaussian policy with the continuous-control defaults (normalisation on) learns
    to answer a cue with the sign of its action (`pararl/DictCue-v0`): 14 of 16 or more
    at its first evaluation (seeds 0-2: 14.0-16.0 after 256 steps) where its untrained
    self gets 6.5-11.0 (3 seeds, 8 evaluations each, learning rate ~0)."""
    cue = {"cue_in": "vector", "continuous": True, **SMALL_IMAGE}
    config = PPOConfig(
        mode="serial", total_steps=4_096, num_steps=64, env_kwargs=cue, run_dir=tmp_path,
        **{**COMMON, "env": "pararl/DictCue-v0", "workers": 1, "envs_per_worker": 2,
           "eval_every": 256, "eval_episodes": 4, "target_return": READ},  # type: ignore[arg-type]
    )  # fmt: skip
    session = train(config)
    assert session.best_eval >= READ, f"PPO: best greedy return {session.best_eval}"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_dqn_batch_learns(mode: str, tmp_path: Path) -> None:
    """Every agent of a batch (`--seeds 2`) learns, acting beside its update or not."""
    options = {**COMMON, "target_return": 1e9}
    train(DQNConfig(seeds=2, mode=mode, total_steps=12_000, run_dir=tmp_path, **options))  # type: ignore[arg-type]
    best: dict[str, float] = {}
    for row in rows(tmp_path / "eval.csv"):
        best[row["agent"]] = max(best.get(row["agent"], 0.0), float(row["eval_return"]))
    assert set(best) == {"0", "1"}
    assert min(best.values()) >= GOOD, f"DQN batch, {mode}: each agent's best {best}"
