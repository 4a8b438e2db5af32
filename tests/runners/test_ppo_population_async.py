"""`--seeds N --mode async`: one actor process steps every agent's envs and acts with
the population's weights `--policy-lag` updates behind while the learner updates.
With lag 0 it is the sync batch in another process; with lag 1 each rollout was
acted one version behind, and the batch checkpoints and resumes as one."""

from __future__ import annotations

import multiprocessing as mp
import shutil
from pathlib import Path

import torch

from pararl import PPOConfig, train
from tests.runners.population import final, rows
from tests.runners.test_ppo_population import SMALL


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
