"""`--seeds N`: N PPO agents in one run. Agent i is the agent a run of seed i alone
trains (to float tolerance), its rows and evaluations are its own, the batch
resumes, loads and evaluates by agent, and what is not batched yet is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pararl import PPOConfig, load, train
from tests.runners.population import (
    assert_evaluations_per_agent,
    assert_named_with_its_agent,
    final,
    rows,
)

SMALL: dict[str, Any] = dict(
    env="CartPole-v1",
    total_steps=768,
    num_steps=32,
    num_envs=4,
    minibatch_size=32,
    update_epochs=2,
    eval_every=512,
    eval_episodes=2,
    tensorboard=False,
    progress="none",
    hidden=(16, 16),
    target_return=10_000.0,
    eval_in="inline",
    learner_threads=1,
)
SEEDS = 2


@pytest.fixture(scope="module")
def batched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sync run of two agents (seeds 3 and 4), two workers stepping their 8 envs."""
    run = tmp_path_factory.mktemp("population") / "sync"
    train(PPOConfig(seed=3, seeds=SEEDS, mode="sync", workers=2, run_dir=run, **SMALL))
    return run


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The runs of seeds 3 and 4 alone, in this process."""
    runs = []
    for i in range(SEEDS):
        run = tmp_path_factory.mktemp("population") / f"seed{3 + i}"
        train(PPOConfig(seed=3 + i, mode="serial", run_dir=run, **SMALL))
        runs.append(run)
    return runs


def assert_same_agent(batched_state: dict[str, Any], single: dict[str, Any]) -> None:
    ours, theirs = batched_state["learner"], single["learner"]
    assert ours["updates"] == theirs["updates"]
    for name, value in theirs["model"].items():
        torch.testing.assert_close(ours["model"][name], value, rtol=1e-4, atol=1e-5, msg=name)
    for moment in ("exp_avg", "exp_avg_sq"):
        torch.testing.assert_close(
            ours["optimizer"][moment], theirs["optimizer"][moment], rtol=1e-3, atol=1e-6
        )


def test_each_agent_is_the_agent_its_seed_trains_alone(batched: Path, alone: list[Path]) -> None:
    state = final(batched)
    assert state["seeds"] == [3, 4]
    for i, run in enumerate(alone):
        assert_same_agent(state["agents"][i], final(run))


def test_serial_batch_agrees_too(tmp_path: Path, alone: list[Path]) -> None:
    run = tmp_path / "serial"
    train(PPOConfig(seed=3, seeds=SEEDS, mode="serial", run_dir=run, **SMALL))
    state = final(run)
    for i, single in enumerate(alone):
        assert_same_agent(state["agents"][i], final(single))


def test_rows_and_evaluations_are_per_agent(batched: Path, alone: list[Path]) -> None:
    metrics = assert_evaluations_per_agent(batched, alone)
    assert all(r["pg_loss"] != "" for r in metrics)


def test_load_and_evaluate_pick_an_agent(batched: Path, pararl: Any) -> None:
    agent = load(batched, "final", agent=1)
    assert agent.config.seed == 4
    assert agent.act(np.zeros(4, np.float32)) in (0, 1)
    result = pararl("evaluate", str(batched), "--agent", "1", "--episodes", "2")
    assert result.returncode == 0, result.stderr
    assert f"(best checkpoint of {batched}, agent 1, seed 4)" in result.stdout
    missing = pararl("evaluate", str(batched), "--episodes", "2")
    assert missing.returncode == 2
    assert "trained 2 agents" in missing.stderr
    assert "--agent" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_the_batch_resumes_as_one(batched: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(batched, run)
    before = final(run)
    train(PPOConfig(resume=run, total_steps=1_024))
    after = final(run)
    assert after["env_steps"] > before["env_steps"]
    assert after["agents"][0]["learner"]["updates"] > before["agents"][0]["learner"]["updates"]
    assert len(after["agents"]) == SEEDS


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--mode", "async", "--vtrace"], "--vtrace"),
        (["--recurrent", "lstm"], "--recurrent"),
        (["--norm-obs"], "--norm-obs"),
        (["--seeds", "0"], "--seeds must be >= 1"),
    ],
)
def test_what_is_not_batched_is_refused_in_one_line(
    option: list[str], said: str, tmp_path: Path, pararl: Any
) -> None:
    args = ["train", "ppo", "--env", "CartPole-v1", "--seeds", "2", *option]
    result = pararl(*args, "--run-dir", str(tmp_path / "r"), "--total-steps", "256")
    assert result.returncode == 2
    assert said in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("mode", ["serial", "sync", "async"])
def test_each_agent_normalises_by_its_own_statistics(mode: str, tmp_path: Path) -> None:
    """Pendulum with its kind's defaults (observation and reward normalisation on):
    each agent's statistics are those of seed i's run alone, updated from its own share
    of every rollout, and so are its weights and its evaluations (a sync batch's agent
    is the serial run's; an async batch's, the async run's with its one actor)."""
    options = {**SMALL, "env": "Pendulum-v1", "eval_every": 384}
    batch = tmp_path / "batch"
    train(PPOConfig(seed=3, seeds=2, mode=mode, workers=2 if mode == "sync" else None,
                    run_dir=batch, **options))  # fmt: skip
    state = final(batch)
    alone_mode = "async" if mode == "async" else "serial"
    alone = [tmp_path / f"seed{3 + i}" for i in range(SEEDS)]
    for i, run in enumerate(alone):
        workers = 1 if alone_mode == "async" else None
        train(PPOConfig(seed=3 + i, mode=alone_mode, workers=workers, run_dir=run, **options))
        single = final(run)
        assert single["learner"]["model"]["norm.obs_count"] > 0  # (normalised, by default)
        assert_same_agent(state["agents"][i], single)  # its statistics among the buffers
    metrics = assert_evaluations_per_agent(batch, alone)
    scales = {(r["agent"], r["reward_scale"]) for r in metrics if r["reward_scale"]}
    assert {agent for agent, _ in scales} == {"0", "1"}
    assert len({scale for _, scale in scales}) > 2  # each agent's own, moving


def test_a_normalised_sweep_resumes_as_its_runs_alone(tmp_path: Path) -> None:
    """A sweep of gamma with reward scaling (each agent's discounted returns by its own
    gamma), resumed (each agent's statistics loaded into its rows): each agent is the
    run of its setting alone, resumed alike."""
    options = {**SMALL, "env": "Pendulum-v1", "eval_every": 384, "mode": "serial"}
    batch = tmp_path / "batch"
    train(PPOConfig(seed=3, sweep=("gamma=0.9,0.99",), run_dir=batch, **options))  # type: ignore[arg-type]
    train(PPOConfig(resume=batch, total_steps=1_536))
    state = final(batch)
    for i, gamma in enumerate((0.9, 0.99)):
        run = tmp_path / f"gamma{i}"
        train(PPOConfig(seed=3, gamma=gamma, run_dir=run, **options))  # type: ignore[arg-type]
        train(PPOConfig(resume=run, total_steps=1_536))
        assert_same_agent(state["agents"][i], final(run))
    scales = [float(a["learner"]["model"]["norm.reward_scale"]) for a in state["agents"]]
    assert scales[0] > 2 * scales[1]  # shorter horizons, smaller returns: larger scales


@pytest.mark.learning_curve
def test_a_sweep_trains_each_setting_as_its_run_alone(tmp_path: Path, pararl: Any) -> None:
    """`--sweep lr=... gamma=...`: agent k has combination k // seeds and seed
    --seed + k % seeds; its discount reaches its envs' advantages (GAE per env)."""
    sweep = ("lr=1e-3,3e-3", "gamma=0.9,0.99")
    run = tmp_path / "sweep"
    train(PPOConfig(seed=7, sweep=sweep, mode="serial", run_dir=run, **SMALL))
    state = final(run)
    assert state["seeds"] == [7, 7, 7, 7]
    combos = [{"lr": lr, "gamma": g} for lr in (1e-3, 3e-3) for g in (0.9, 0.99)]
    assert state["settings"] == combos
    for k in (1, 2):  # two of the four, each against its run alone
        alone = tmp_path / f"alone{k}"
        train(PPOConfig(seed=7, mode="serial", run_dir=alone, **combos[k], **SMALL))
        assert_same_agent(state["agents"][k], final(alone))
    assert load(run, "final", agent=3).config.lr == 3e-3
    assert load(run, "final", agent=3).config.gamma == 0.99
    assert (run / "learning_curve.png").is_file()
    result = pararl("evaluate", str(run), "--agent", "3", "--episodes", "1")
    assert result.returncode == 0, result.stderr
    assert f"(best checkpoint of {run}, agent 3, seed 7, lr=0.003, gamma=0.99)" in result.stdout


def test_a_sweep_from_python_takes_the_forms_python_makes_natural() -> None:
    from pararl.errors import UsageError

    as_given = PPOConfig(sweep=("lr=3e-4,1e-3", "gamma=0.9,0.99")).grid
    assert PPOConfig(sweep={"lr": [3e-4, 1e-3], "gamma": (0.9, 0.99)}).grid == as_given  # type: ignore[arg-type]
    assert PPOConfig(sweep="lr=3e-4,1e-3").grid == [{"lr": 3e-4}, {"lr": 1e-3}]  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"give NAME=V1,V2,\.\.\. items"):
        PPOConfig(sweep=[("lr", 3e-4)])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sweep", "said"),
    [
        ("hidden=8,16", "--sweep hidden=8,16: PPO sweeps lr, gamma"),
        ("lr=", "give its values as lr=V1,V2"),
        ("gamma=0.9,1.5", "--sweep (gamma=1.5): --gamma must be in (0, 1]"),
        ("lr=1e-3,0.001", "--sweep lr=1e-3,0.001: a value is given twice"),
        # a swept setting given its own value too (the sweep's would win unsaid)
        ("lr=3e-4,1e-3 --lr 5e-4", "--lr 0.0005 and --sweep lr=...: a swept setting takes"),
    ],
)
def test_a_bad_sweep_is_one_line(sweep: str, said: str, tmp_path: Path, pararl: Any) -> None:
    args = ["train", "ppo", "--env", "CartPole-v1", "--sweep", *sweep.split()]
    result = pararl(*args, "--run-dir", str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()
    assert result.returncode == 2
    assert said in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("mode", ["serial", "sync", "async"])
def test_a_failing_env_is_reported_with_its_agent(mode: str, tmp_path: Path) -> None:
    """Agent 1's third env fails (the env first reset with its seed), wherever it
    runs: in this process, a worker, or the actor."""
    import pararl.envs  # noqa: F401 - registers pararl/Faulty-v0
    from pararl import seeding

    seeded = seeding.env_seeds(6, 4, "env", 0, 0, 0)[2]  # agent 1 = seed 6, its env 2
    options = {**SMALL, "env": "pararl/Faulty-v0", "env_kwargs": {"at": 40, "seeded": seeded}}
    workers = 2 if mode == "sync" else None  # serial and async have no env workers
    config = PPOConfig(
        seeds=2, seed=5, mode=mode, workers=workers, run_dir=tmp_path / "r", **options
    )
    with pytest.raises(RuntimeError, match="FaultyEnv failed") as info:
        train(config)
    assert_named_with_its_agent(info.value, per_agent=4, first_seed=5, agent=1, own=2)


def test_the_evaluation_process_evaluates_every_agent(batched: Path, tmp_path: Path) -> None:
    """In the evaluation child (the population built there, its weights sent), each
    agent plays its own seed's episodes, as the inline evaluations did."""
    run = tmp_path / "process"
    options = {**SMALL, "eval_in": "process"}
    train(PPOConfig(seed=3, seeds=SEEDS, mode="sync", workers=2, run_dir=run, **options))
    inline = {(r["env_steps"], r["agent"]): r["eval_return"] for r in rows(batched / "eval.csv")}
    done = rows(run / "eval.csv")
    assert {r["agent"] for r in done} == {"0", "1"}
    assert json.loads((run / "config.json").read_text())["resolved"]["eval_in"] == "process"
    for r in done:  # evaluations skipped while one ran are not in either file alike
        assert float(r["eval_return"]) == pytest.approx(float(inline[(r["env_steps"], r["agent"])]))
