"""TD3 with Ray actors, on the same chunk pool as DQN's and SAC's: it trains with a
Ray actor acting with the actor and its noise (one actor: each starts a Ray worker
process, which imports torch; the actors' placement over the two nodes is checked in
tests/samplers/ray/test_chunks.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pararl.api import train
from pararl.config.td3 import TD3Config
from tests.runners.saved import final_state

ray = pytest.importorskip("ray")

TINY = TD3Config(
    env="Pendulum-v1",
    backend="ray",
    workers=1,
    envs_per_worker=2,
    total_steps=1_000,
    learning_starts=250,
    batch_size=64,
    buffer_size=20_000,
    hidden=(32,),
    eval_every=1_000,
    eval_episodes=1,
    progress="none",
    tensorboard=False,
)


def test_td3_trains_with_ray_actors(two_nodes: str, tmp_path: Path) -> None:
    session = train(dataclasses.replace(TINY, run_dir=tmp_path / "run"))
    assert '"backend": "ray"' in (tmp_path / "run" / "config.json").read_text()
    assert session.last_eval is not None
    state = final_state(tmp_path / "run")
    assert state["env_steps"] >= 1_000
    assert state["learner"]["updates"] > 0
    actions = state["replay"]["action"]
    assert actions.shape[1:] == (1,)
    assert (abs(actions) <= 2).all()  # Pendulum's bounds, noise and all
