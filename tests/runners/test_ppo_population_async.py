"""`--seeds N --mode async`: one actor process steps every agent's envs and acts with
the population's weights `--policy-lag` updates behind while the learner updates.
With lag 0 it is the sync batch in another process; with lag 1 each rollout was
acted one version behind, each agent is the agent of its seed's async run alone, and
the batch checkpoints and resumes as one. `--mode auto` runs a batch as a run of one
of its agents would run."""

from __future__ import annotations

import json
import multiprocessing as mp
import shutil
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch

from pararl import PPOConfig, train
from pararl.runners import ppo_population
from tests.runners.population import final, rows
from tests.runners.test_ppo_population import SMALL, assert_same_agent


def test_lag_0_is_the_sync_batch(tmp_path: Path) -> None:
    """The same rollouts (the same env seeds, each agent's own draws), so the same
    updates: the actor acts as the sync loop does, in its own process."""
    common = dict(SMALL, seed=3, seeds=2, total_steps=512)
    train(PPOConfig(mode="sync", workers=2, run_dir=tmp_path / "sync", **common))  # type: ignore[arg-type]
    train(PPOConfig(mode="async", policy_lag=0, run_dir=tmp_path / "async", **common))  # type: ignore[arg-type]
    sync, lagged = final(tmp_path / "sync"), final(tmp_path / "async")
    for ours, theirs in zip(lagged["agents"], sync["agents"], strict=True):
        assert ours["learner"]["updates"] == theirs["learner"]["updates"]
        for name, value in theirs["learner"]["model"].items():
            torch.testing.assert_close(ours["learner"]["model"][name], value, msg=name)
    evals = [(r["agent"], r["eval_return"]) for r in rows(tmp_path / "async" / "eval.csv")]
    assert evals == [(r["agent"], r["eval_return"]) for r in rows(tmp_path / "sync" / "eval.csv")]


def test_lag_1_acts_a_version_behind_and_resumes_as_one(tmp_path: Path) -> None:
    run = tmp_path / "run"
    train(PPOConfig(seed=3, seeds=2, mode="async", policy_lag=1, run_dir=run, **SMALL))  # type: ignore[arg-type]
    metrics = rows(run / "metrics.csv")
    assert {r["agent"] for r in metrics} == {"0", "1"}
    lags = [float(r["policy_lag"]) for r in metrics]
    assert set(lags[2:]) == {1.0}  # (the first rollout: version 0, lag 0)
    assert all(0.0 < float(r["actor_busy"]) <= 1.0 for r in metrics)
    assert not mp.active_children()
    before = final(run)
    resumed = tmp_path / "resumed"
    shutil.copytree(run, resumed)
    train(PPOConfig(resume=resumed, total_steps=1_024))
    after = final(resumed)
    assert after["env_steps"] > before["env_steps"]
    assert [a["learner"]["updates"] for a in after["agents"]] > [
        a["learner"]["updates"] for a in before["agents"]
    ]
    assert not mp.active_children()


def test_each_agent_is_the_agent_its_seeds_async_run_trains_alone(tmp_path: Path) -> None:
    """One actor process acting one update behind, in a batch or alone: the same
    rollouts, so the same agent (a run alone on 2 cores has one actor process)."""
    train(PPOConfig(seed=3, seeds=2, mode="async", run_dir=tmp_path / "batch", **SMALL))  # type: ignore[arg-type]
    batch = final(tmp_path / "batch")
    for i in range(2):
        run = tmp_path / f"seed{3 + i}"
        train(PPOConfig(seed=3 + i, mode="async", workers=1, run_dir=run, **SMALL))  # type: ignore[arg-type]
        assert_same_agent(batch["agents"][i], final(run))


@pytest.mark.parametrize(
    ("model", "step_s", "cores", "workers", "continuous", "mode"),
    [
        ("mlp", 5e-6, 2, None, False, "async"),  # cheap envs: an actor process, as alone
        ("mlp", 5e-3, 2, None, False, "sync"),  # envs worth workers
        ("mlp", 5e-6, 2, 4, False, "sync"),  # workers asked for
        ("mlp", 5e-6, 2, None, True, "sync"),  # a Gaussian policy learns worse lagged
        ("minatar-cnn", 5e-6, 2, None, False, "sync"),  # the update takes every core
        ("mlp", 5e-6, 1, None, False, "serial"),
    ],
)
def test_auto_runs_an_mlp_batch_on_cheap_envs_async_as_its_runs_alone(
    model: str,
    step_s: float,
    cores: int,
    workers: int | None,
    continuous: bool,
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ppo_population, "physical_cores", lambda: cores)
    env = gym.make("CartPole-v1")
    options = {**SMALL, "num_envs": 8, "workers": workers}
    given = PPOConfig(seeds=4, model=model, **options)  # type: ignore[arg-type]
    cfg = given.for_spaces(env.observation_space, env.action_space).config
    choice, used = ppo_population.layout(cfg, 32, lambda fn: step_s, lambda: 100e-6, continuous)
    assert choice.mode == mode, choice.reason
    assert used == (1 if mode == "async" else workers or cores)


@pytest.mark.parametrize(
    ("given", "convolutional", "steps", "expected"),
    [
        ("auto", False, 1_000_000, "compile"),  # 8 x 32 steps a rollout: 78k updates
        ("auto", False, 50_000, "eager"),  # 3.9k updates do not repay a compile
        ("auto", True, 1_000_000, "eager"),  # not measured compiled
        ("off", False, 1_000_000, "eager"),
        ("on", True, 50_000, "compile"),
    ],
)
def test_auto_compiles_a_long_mlp_batchs_loss(
    given: str, convolutional: bool, steps: int, expected: str
) -> None:
    env = gym.make("CartPole-v1")
    options = {**SMALL, "minibatch_size": 256, "update_epochs": 20, "num_steps": 32}
    config = PPOConfig(seeds=8, compile=given, **{**options, "total_steps": steps})  # type: ignore[arg-type]
    cfg = config.for_spaces(env.observation_space, env.action_space).config
    choose = ppo_population.population_step_mode
    assert choose(cfg, 8, torch.device("cpu"), convolutional) == expected
    on_gpu = choose(cfg, 8, torch.device("meta"), convolutional)
    assert on_gpu == ("compile" if given == "on" else "eager")


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_compile_on_trains_the_batch_as_the_loss_as_written_does(
    env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loss traced with "aot_eager" (inductor's graph capture and autograd without
    its kernels, which take tens of seconds to build here): the same agents, Pendulum's
    with each agent's normalisation statistics moving between the traced calls."""
    from pararl.algos import fused

    monkeypatch.setattr(fused, "BACKEND", "aot_eager")
    compiled_fns: list[Any] = []
    compile = torch.compile

    def counted(fn: Any, **options: Any) -> Any:
        compiled_fns.append(fn)
        return compile(fn, **options)

    monkeypatch.setattr(torch, "compile", counted)
    runs = {c: tmp_path / c for c in ("on", "off")}
    traced = {}
    for given, run in runs.items():
        options = {**SMALL, "env": env}
        train(PPOConfig(seed=3, seeds=2, mode="serial", compile=given, run_dir=run, **options))  # type: ignore[arg-type]
        traced[given], compiled_fns[:] = len(compiled_fns), []
    assert traced == {"on": 1, "off": 0}  # one loss (no masks), traced once
    resolved = json.loads((runs["on"] / "config.json").read_text())["resolved"]
    assert resolved["step_mode"] == "compile"
    compiled, written = final(runs["on"]), final(runs["off"])
    for ours, theirs in zip(compiled["agents"], written["agents"], strict=True):
        assert_same_agent(ours, theirs)


@pytest.mark.parametrize("mode", ["async", "serial"])
def test_workers_where_a_batch_has_none_are_refused_in_one_line(mode: str) -> None:
    from pararl.errors import UsageError

    env = gym.make("CartPole-v1")
    given = PPOConfig(seeds=2, mode=mode, workers=2, **{**SMALL, "num_envs": 8})  # type: ignore[arg-type]
    cfg = given.for_spaces(env.observation_space, env.action_space).config
    with pytest.raises(UsageError, match=rf"--workers 2: a batch in --mode {mode} steps every"):
        ppo_population.layout(cfg, 16, lambda fn: 5e-6, lambda: 100e-6)
