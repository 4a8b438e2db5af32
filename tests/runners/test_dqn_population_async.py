"""`--seeds N --mode async`: one actor process steps every agent's envs and acts
with the population's weights while this process updates them. Timing decides how
far behind the weights that acted are, so agreement with each seed's run alone is
the benchmark's statistical check (`python -m benchmarks seeds`); here: each agent
learns from its own transitions at its replay ratio, the batch checkpoints, loads
and resumes as one, a failing env is named with its agent, and nothing is left
running."""

from __future__ import annotations

import json
import multiprocessing as mp
import shutil
from pathlib import Path

import pytest

from pararl import DQNConfig, load, train
from pararl.runners.dqn_population import choose_population_mode
from tests.procs import ctrl_c_train
from tests.runners.population import assert_named_with_its_agent, final, rows
from tests.runners.saved import final_state
from tests.runners.test_dqn_population import SMALL


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("population") / "async"
    train(DQNConfig(seed=3, seeds=2, mode="async", run_dir=path, **SMALL))
    return path


def test_each_agent_learns_from_its_own_transitions_at_its_ratio(run: Path) -> None:
    state = final_state(run)
    assert state["seeds"] == [3, 4]
    steps, ratio = state["env_steps"], json.loads((run / "config.json").read_text())["replay_ratio"]
    assert steps >= SMALL["total_steps"]
    memories = state["replay"]
    for agent, memory in zip(state["agents"], memories, strict=True):
        assert agent["env_steps"] == steps
        # a transition per env step but the resets' (a CartPole episode is 8 steps
        # or more) and the n-step builder's last n - 1 per env
        assert 0.85 * steps - 2 * 2 <= memory["added"] <= steps
        # the ratio held: never ahead, behind by at most the last chunk's updates
        # (256 env steps' worth at a quarter of an update per step)
        due = ratio * (steps - SMALL["learning_starts"])
        assert due - 64 - 1 <= agent["learner"]["updates"] <= due
    a, b = (agent["learner"]["q"] for agent in state["agents"])
    assert any(not (a[k] == b[k]).all() for k in a)  # two agents, not one twice


def test_rows_say_how_far_behind_the_actor_acted(run: Path) -> None:
    metrics = rows(run / "metrics.csv")
    assert {r["agent"] for r in metrics} == {"0", "1"}
    # (a row with no chunk since the last one has no lag)
    lags = [float(r["policy_lag"]) for r in metrics if r["policy_lag"]]
    assert lags
    assert all(lag >= 0 for lag in lags)
    assert all(0.0 <= float(r["actor_cpu"]) <= 1.0 for r in metrics if r["actor_cpu"])
    evals = rows(run / "eval.csv")
    assert [r["agent"] for r in evals][:2] == ["0", "1"]
    assert not mp.active_children()


def test_the_batch_loads_by_agent_and_resumes_as_one(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = load(run, agent=1)
    assert agent.act([0.0, 0.0, 0.0, 0.0]) in (0, 1)
    resumed = tmp_path / "resumed"
    shutil.copytree(run, resumed)
    before = final(resumed)
    # in another mode, on two workers: each agent steps twice the envs, and is told so
    train(DQNConfig(resume=resumed, total_steps=1_200, mode="serial", workers=2, progress="plain"))
    said = capsys.readouterr()
    assert (
        "this run stepped 2 envs each before and goes on with 4 (mode async, now serial)"
        in said.err
    )
    assert json.loads((resumed / "config.json").read_text())["resolved"]["num_envs"] == 4
    after = final(resumed)
    assert after["env_steps"] >= 1_200 > before["env_steps"]
    for old, new in zip(before["agents"], after["agents"], strict=True):
        assert new["learner"]["updates"] > old["learner"]["updates"]
    assert not mp.active_children()


@pytest.mark.parametrize("mode", ["serial", "sync", "async"])
def test_a_failing_env_is_reported_with_its_agent(mode: str, tmp_path: Path) -> None:
    """Agent 1's second env fails (the env first reset with its seed), wherever it
    runs: in this process, a worker, or the actor."""
    import pararl.envs  # noqa: F401 - registers pararl/Faulty-v0
    from pararl import seeding

    seeded = seeding.env_seeds(6, 2, "env", 0, 0, 0)[1]  # agent 1 = seed 6, its env 1
    kwargs = {"at": 40, "seeded": seeded}
    options = {**SMALL, "env": "pararl/Faulty-v0", "env_kwargs": kwargs}
    with pytest.raises(RuntimeError, match="FaultyEnv failed") as info:
        train(DQNConfig(seeds=2, seed=5, mode=mode, run_dir=tmp_path / "r", **options))
    assert_named_with_its_agent(info.value, per_agent=2, first_seed=5, agent=1, own=1)
    assert not mp.active_children()


def test_auto_acts_beside_an_mlps_update_and_not_a_cnns(monkeypatch: pytest.MonkeyPatch) -> None:
    from pararl.runners import dqn_population

    monkeypatch.setattr(dqn_population, "physical_cores", lambda: 2)
    cfg = DQNConfig(seeds=2, **SMALL)
    assert choose_population_mode(cfg, convolutional=False, workers=2).mode == "async"
    asked = DQNConfig(seeds=2, **{**SMALL, "mode": "sync"})
    assert choose_population_mode(asked, convolutional=False, workers=2).mode == "sync"
    # a CNN's update takes every core: auto chooses between serial and sync
    assert choose_population_mode(cfg, convolutional=True, workers=2).mode in ("serial", "sync")
    monkeypatch.setattr(dqn_population, "physical_cores", lambda: 1)
    assert choose_population_mode(cfg, convolutional=False, workers=1).mode == "serial"


def test_ctrl_c_stops_the_actor_saves_every_agent_and_leaves_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    ctrl_c_train(run, "dqn", "--seeds", "2", "--mode", "async", "--learning-starts", "500")
    state = final_state(run, "interrupted")
    assert len(state["agents"]) == len(state["replay"]) == 2
    assert all(memory["added"] > 0 for memory in state["replay"])
