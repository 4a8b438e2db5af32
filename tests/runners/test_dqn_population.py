"""`--seeds N`: N DQN agents in one run. Agent i is the agent a run of seed i alone
trains (to float tolerance), before and after a resume; its rows and evaluations are
its own, the batch loads and evaluates by agent, and what is not batched yet is
refused in one line."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
import torch

from pararl import DQNConfig, load, train
from pararl.errors import UsageError
from tests.runners.population import assert_evaluations_per_agent, final
from tests.runners.saved import final_state

SMALL: dict[str, Any] = dict(
    env="CartPole-v1",
    total_steps=800,
    learning_starts=200,
    eval_every=400,
    eval_episodes=2,
    checkpoint_every=400,
    tensorboard=False,
    progress="none",
    hidden=(32,),
    batch_size=32,
    envs_per_worker=2,
    workers=1,
    target_return=10_000.0,
    eval_in="inline",
    learner_threads=1,
)
SEEDS = 2
MORE = 1_200  # the budget the runs are resumed to


@pytest.fixture(scope="module")
def batched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sync run of two agents (seeds 3 and 4), one worker stepping their 4 envs."""
    run = tmp_path_factory.mktemp("population") / "sync"
    train(DQNConfig(seed=3, seeds=SEEDS, mode="sync", run_dir=run, **SMALL))
    return run


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The runs of seeds 3 and 4 alone, in this process."""
    runs = []
    for i in range(SEEDS):
        run = tmp_path_factory.mktemp("population") / f"seed{3 + i}"
        train(DQNConfig(seed=3 + i, mode="serial", run_dir=run, **SMALL))
        runs.append(run)
    return runs


def max_difference(ours: dict[str, Any], theirs: dict[str, Any]) -> float:
    """The largest difference between two DQN learners' saved weights, target
    weights and optimizer moments; their update and step counts must be equal."""
    assert ours["updates"] == theirs["updates"]
    assert ours["optimizer"]["steps"] == theirs["optimizer"]["steps"]
    pairs = [(ours[k][n], theirs[k][n]) for k in ("q", "q_target") for n in theirs[k]]
    pairs += [(ours["optimizer"][m], theirs["optimizer"][m]) for m in ("exp_avg", "exp_avg_sq")]
    return max(float((a - b).abs().max()) for a, b in pairs)


def assert_same_agent(batched_state: dict[str, Any], single: dict[str, Any]) -> None:
    assert batched_state["env_steps"] == single["env_steps"]
    ours, theirs = batched_state["learner"], single["learner"]
    # measured: 1.2e-7 after ~150 updates (the batched products round in another order)
    assert max_difference(ours, theirs) < 1e-5
    for name, value in theirs["q"].items():
        torch.testing.assert_close(ours["q"][name], value, rtol=1e-4, atol=1e-5, msg=name)


def test_each_agent_is_the_agent_its_seed_trains_alone(batched: Path, alone: list[Path]) -> None:
    state = final(batched)
    assert state["seeds"] == [3, 4]
    assert state["agents"][0]["learner"]["updates"] > 100
    for i, run in enumerate(alone):
        assert_same_agent(state["agents"][i], final(run))


def test_serial_batch_agrees_too(tmp_path: Path, alone: list[Path]) -> None:
    run = tmp_path / "serial"
    train(DQNConfig(seed=3, seeds=SEEDS, mode="serial", run_dir=run, **SMALL))
    state = final(run)
    for i, single in enumerate(alone):
        assert_same_agent(state["agents"][i], final(single))


def test_rows_and_evaluations_are_per_agent(batched: Path, alone: list[Path]) -> None:
    metrics = assert_evaluations_per_agent(batched, alone)
    assert all(r["epsilon"] != "" and r["loss"] != "" for r in metrics)


def test_each_agents_replay_memory_is_its_runs(batched: Path, alone: list[Path]) -> None:
    memories = final_state(batched)["replay"]
    assert isinstance(memories, list)
    assert len(memories) == SEEDS
    for memory, run in zip(memories, alone, strict=True):
        theirs = final_state(run)["replay"]
        assert memory["added"] == theirs["added"]
        np.testing.assert_array_equal(memory["action"], theirs["action"])
        np.testing.assert_array_equal(memory["obs"], theirs["obs"])


def test_load_and_evaluate_pick_an_agent(batched: Path, pararl: Any) -> None:
    agent = load(batched, "final", agent=1)
    assert agent.config.seed == 4
    assert agent.act(np.zeros(4, np.float32)) in (0, 1)
    result = pararl("evaluate", str(batched), "--agent", "1", "--episodes", "2")
    assert result.returncode == 0, result.stderr
    missing = pararl("evaluate", str(batched), "--episodes", "2")
    assert missing.returncode == 2
    assert "trained 2 agents" in missing.stderr
    assert "--agent" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_the_batch_resumes_as_one_and_as_each_run_alone(
    batched: Path, alone: list[Path], tmp_path: Path
) -> None:
    """The resumed batch (its replay memories restored) goes on as each agent's run
    alone, resumed, goes on."""
    run = tmp_path / "run"
    shutil.copytree(batched, run)
    before = final(run)
    train(DQNConfig(resume=run, total_steps=MORE))
    after = final(run)
    assert after["env_steps"] == MORE
    assert after["agents"][0]["learner"]["updates"] > before["agents"][0]["learner"]["updates"]
    assert len(after["agents"]) == SEEDS
    for i, single in enumerate(alone):
        copy = tmp_path / f"alone{i}"
        shutil.copytree(single, copy)
        train(DQNConfig(resume=copy, total_steps=MORE))
        assert_same_agent(after["agents"][i], final(copy))


def test_a_changed_number_of_agents_is_refused_on_resume(
    batched: Path, tmp_path: Path, pararl: Any
) -> None:
    run = tmp_path / "run"
    shutil.copytree(batched, run)
    result = pararl("train", "dqn", "--resume", str(run), "--seeds", "3")
    assert result.returncode == 2
    assert "--seeds 2" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # nor is a mode the batch does not run in (averaging takes its own path)
    averaged = pararl("train", "--resume", str(run), "--total-steps", "4096", "--mode", "averaging")
    assert averaged.returncode == 2, averaged.stderr
    assert "--seeds 2: --mode averaging is not batched" in averaged.stderr
    assert len(averaged.stderr.strip().splitlines()) == 1
    # an agent is picked by its index, an int
    with pytest.raises(UsageError, match=r"agent='1': give the agent's index as an int"):
        load(run, "final", agent="1")  # type: ignore[arg-type]
    assert (
        load(run, "final", agent=np.int64(1)).config.seed == load(run, "final", agent=1).config.seed
    )


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--mode", "averaging"], "--mode averaging"),
        (["--prioritized"], "--prioritized"),
        (["--acting-lag", "2"], "--acting-lag"),
        (["--mode", "async", "--restart-actors"], "--restart-actors"),
        (["--compile", "on"], "--compile on"),
        (["--seeds", "0"], "--seeds must be >= 1"),
    ],
)
def test_what_is_not_batched_is_refused_in_one_line(
    option: list[str], said: str, tmp_path: Path, pararl: Any
) -> None:
    args = ["train", "dqn", "--env", "CartPole-v1", "--seeds", "2", *option]
    result = pararl(*args, "--run-dir", str(tmp_path / "r"), "--total-steps", "256")
    assert result.returncode == 2
    assert said in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_replay_memories_that_do_not_fit_together_are_refused(tmp_path: Path, pararl: Any) -> None:
    """Each memory would fit in the memory available, three do not: refused at start,
    before any is made, saying what they need and what to lower."""
    slot = 2 * 4 * 4 + 8 + 4 + 4  # CartPole: two float32 observations, action, return, discount
    capacity = int(0.6 * psutil.virtual_memory().available / slot)
    args = ["train", "dqn", "--env", "CartPole-v1", "--seeds", "3", "--mode", "serial"]
    result = pararl(
        *args,
        "--buffer-size",
        str(capacity),
        "--run-dir",
        str(tmp_path / "r"),
        "--total-steps",
        "256",
    )
    assert result.returncode == 2
    assert "--seeds 3 x --buffer-size" in result.stderr
    assert "lower --buffer-size or --seeds" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
