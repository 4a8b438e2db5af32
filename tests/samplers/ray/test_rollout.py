"""PPO with Ray actors: trains on one node and on two, Dict observations too; an
actor killed while it collects is restarted, the update still gets every env's
segment, and the segments already received are kept."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import gymnasium as gym
import pytest

from pararl import checkpoint
from pararl.api import train
from pararl.config import PPOConfig

ray = pytest.importorskip("ray")

TINY = PPOConfig(
    backend="ray",
    workers=2,
    envs_per_worker=2,
    num_steps=16,
    total_steps=640,
    update_epochs=2,
    minibatch_size=32,
    eval_every=640,
    eval_episodes=1,
    progress="none",
    tensorboard=False,
)


def test_ppo_trains_with_ray_actors(ray_kind: str, tmp_path: Path) -> None:
    session = train(dataclasses.replace(TINY, run_dir=tmp_path / "run"))
    assert '"mode": "ray"' in (tmp_path / "run" / "config.json").read_text()
    assert session.last_eval is not None
    assert (tmp_path / "run" / "checkpoints" / "final.pt").is_file()


@pytest.mark.parametrize("vtrace", [False, True])
def test_async_ppo_on_ray_actors_trails_by_the_lag(
    ray_kind: str, tmp_path: Path, vtrace: bool
) -> None:
    """--mode async on Ray: rollout j acted with version j - 1 (0 for the first), each
    logged; V-trace relabels the Ray actors' rollouts as it does the local ones'."""
    import csv

    run = tmp_path / "run"
    config = dataclasses.replace(
        TINY, mode="async", vtrace=vtrace, log_every_s=0.0, run_dir=run, total_steps=384
    )
    session = train(config)
    assert session.last_eval is not None
    with (run / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(float(r["policy_lag"])) for r in rows] == [0] + [1] * (len(rows) - 1)
    assert len(rows) == 384 // (16 * 4)
    if vtrace:
        assert all(0.5 < float(r["vtrace_rho"]) < 2.0 for r in rows)


def test_ray_actors_act_within_masks_in_a_multi_discrete_space(
    ray_kind: str, tmp_path: Path
) -> None:
    """MultiDiscrete actions with a mask per dimension: the env raises on an action
    outside its mask, so the run ends only if no Ray actor gave it one."""
    config = dataclasses.replace(TINY, env="pararl/MaskedMultiDiscrete-v0", run_dir=tmp_path)
    session = train(config)
    assert session.last_eval is not None
    assert '"mode": "ray"' in (tmp_path / "config.json").read_text()


def test_ppo_trains_on_dict_observations_with_ray_actors(ray_kind: str, tmp_path: Path) -> None:
    """Segments of Dict observations (one array per leaf) are joined leaf by leaf."""
    run = tmp_path / "run"
    session = train(dataclasses.replace(TINY, env="pararl/DictCue-v0", run_dir=run))
    assert session.last_eval is not None
    assert (run / "checkpoints" / "final.pt").is_file()


def test_recurrent_ppo_trains_with_ray_actors(ray_kind: str, tmp_path: Path) -> None:
    """A recurrent policy's segments carry each env's first flags and starting state,
    joined env by env; the update replays them (2 minibatches of 2 envs' sequences)."""
    run = tmp_path / "run"
    config = dataclasses.replace(TINY, recurrent="gru", run_dir=run, total_steps=384)
    session = train(config)
    assert session.last_eval is not None
    saved = checkpoint.load(run / "checkpoints" / "final.pt")["learner"]["model"]
    assert "core.rnn.weight_hh_l0" in saved


def test_actor_killed_mid_rollout_is_replaced(two_nodes: str) -> None:
    from pararl.runners.ppo_state import PPOState
    from pararl.samplers.rollout.ray import RayPPOPool

    config = dataclasses.replace(TINY, env="pararl/SlowStep-v0", num_steps=128)
    env = gym.make(config.env)
    spaces = env.observation_space, env.action_space
    state = PPOState(config.for_spaces(*spaces), *spaces, 4)
    env.close()
    log: list[str] = []
    pool = RayPPOPool(state.make_model, state.rollout_spec, config, 2, 0, log.append)
    try:
        arrays, _ = pool.gather(state.learner.model, 0)  # actors up and acting
        assert arrays["obs"].shape[:2] == (128, 2 * 2)

        def kill_soon() -> None:
            while not pool.group.pending:
                time.sleep(0.01)
            time.sleep(0.1)  # inside the 256 ms rollout
            ray.kill(pool.group.actors[0], no_restart=False)

        killer = threading.Thread(target=kill_soon)
        killer.start()
        arrays, _ = pool.gather(state.learner.model, 1)
        killer.join(10)
        assert any(m.startswith("pararl: actor 0 died, restarted") for m in log), log
        assert arrays["obs"].shape[:2] == (128, 2 * 2)  # the lost segment was collected again
        assert pool.received == 2 * 2 * 2 * 128
    finally:
        pool.close()


def test_ray_actors_act_with_the_learners_statistics(ray_kind: str) -> None:
    """Normalisation statistics travel with the weights: the values an actor computed
    for its segment are the learner's values of the same raw observations."""
    import numpy as np
    import torch

    from pararl.runners.ppo_state import PPOState
    from pararl.samplers.rollout.ray import RayPPOPool

    config = dataclasses.replace(TINY, env="Pendulum-v1")
    env = gym.make(config.env)
    spaces = env.observation_space, env.action_space
    state = PPOState(config.for_spaces(*spaces), *spaces, 4)
    env.close()
    assert state.settings.norm_obs  # continuous defaults
    rng = np.random.default_rng(0)
    state.learner.model.norm.update(rng.normal(5.0, 3.0, (256, 3)), rng.normal(size=256))
    pool = RayPPOPool(state.make_model, state.rollout_spec, config, 2, 0, lambda _: None)
    try:
        arrays, _ = pool.gather(state.learner.model, 0)
    finally:
        pool.close()
    with torch.no_grad():
        obs = torch.as_tensor(arrays["obs"].reshape(-1, 3))
        values = state.learner.model.value(obs).numpy()
    np.testing.assert_allclose(arrays["values"].reshape(-1), values, rtol=1e-5, atol=1e-6)
