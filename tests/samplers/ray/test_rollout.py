"""PPO with Ray actors: trains in async mode, exactly a policy lag behind and within
action masks, and recurrent on Dict observations; an actor killed while it collects
is restarted, the update still gets every env's segment, the segments already
received are kept, and every actor (the restarted one too) acts with the learner's
normalisation statistics.

Each test starts its own actors (a Ray worker process each, which imports torch: most
of a test's time), so one run checks several things: the things a run proves are
checked on the one run that has them all."""

from __future__ import annotations

import csv
import dataclasses
import threading
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl import checkpoint
from pararl.api import evaluate, load, train
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


def test_async_ppo_on_ray_actors_trails_by_the_lag_within_masks(
    ray_kind: str, tmp_path: Path
) -> None:
    """--mode async on Ray: rollout j acted with version j - 1 (0 for the first), each
    logged; V-trace relabels the Ray actors' rollouts as it does the local ones'. The
    env has MultiDiscrete actions with a mask per dimension and raises on an action
    outside its mask, so the run ends only if no Ray actor gave it one. One actor with
    the 4 envs (segments of several actors are joined in the tests below)."""
    run = tmp_path / "run"
    config = dataclasses.replace(
        TINY,
        env="pararl/MaskedMultiDiscrete-v0",
        workers=1,
        envs_per_worker=4,
        mode="async",
        vtrace=True,
        log_every_s=0.0,
        run_dir=run,
        total_steps=384,
    )
    session = train(config)
    assert session.last_eval is not None
    assert '"mode": "ray"' in (run / "config.json").read_text()
    with (run / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(float(r["policy_lag"])) for r in rows] == [0] + [1] * (len(rows) - 1)
    assert len(rows) == 384 // (16 * 4)
    assert all(0.5 < float(r["vtrace_rho"]) < 2.0 for r in rows)
    assert (run / "checkpoints" / "final.pt").is_file()


def test_recurrent_ppo_trains_on_dict_observations_with_ray_actors(
    ray_kind: str, tmp_path: Path
) -> None:
    """Segments of Dict observations (one array per leaf) are joined leaf by leaf; a
    recurrent policy's segments carry each env's first flags and starting state,
    joined env by env; the update replays them (2 minibatches of 2 envs' sequences).
    The run logs to TensorBoard, and what it saved acts again with its state
    (`load().act`, a video)."""
    run = tmp_path / "run"
    config = dataclasses.replace(
        TINY, env="pararl/DictCue-v0", recurrent="gru", run_dir=run, total_steps=384,
        tensorboard=True,
    )  # fmt: skip
    session = train(config)
    assert session.last_eval is not None
    assert '"mode": "ray"' in (run / "config.json").read_text()
    saved = checkpoint.load(run / "checkpoints" / "final.pt")["learner"]["model"]
    assert "core.rnn.weight_hh_l0" in saved
    assert any(key.startswith("encoder.") for key in saved)  # the multi-input encoder
    assert list((run / "tb").glob("events.out.tfevents.*"))
    agent = load(run)
    obs, _ = agent.make_env().reset(seed=0)
    _, state = agent.act(obs, state=None)
    _, carried = agent.act(obs, state=state)
    assert not torch.equal(carried, state)  # the GRU's state, carried on
    video = tmp_path / "episode.gif"
    evaluate(run, episodes=1, video=video)
    assert video.stat().st_size > 0


def test_actor_killed_mid_rollout_is_replaced_and_all_act_with_the_learners_statistics(
    two_nodes: str,
) -> None:
    """A killed actor is restarted and its lost segment collected again; the segments
    already received are kept. Normalisation statistics travel with the weights: the
    values each actor computed for its segment (before the kill, and the restarted
    actor's after it) are the learner's values of the same raw observations."""
    from pararl.runners.ppo_state import PPOState
    from pararl.samplers.rollout.ray import RayPPOPool

    config = dataclasses.replace(TINY, env="pararl/SlowStep-v0", num_steps=128, norm_obs=True)
    env = gym.make(config.env)
    spaces = env.observation_space, env.action_space
    state = PPOState(config.for_spaces(*spaces), *spaces, 4)
    env.close()
    assert state.settings.norm_obs
    rng = np.random.default_rng(0)
    state.learner.model.norm.update(rng.normal(5.0, 3.0, (256, 8)), rng.normal(size=256))

    def assert_learners_values(arrays: dict[str, np.ndarray]) -> None:
        with torch.no_grad():
            obs = torch.as_tensor(arrays["obs"].reshape(-1, 8))
            values = state.learner.model.value(obs).numpy()
        np.testing.assert_allclose(arrays["values"].reshape(-1), values, rtol=1e-5, atol=1e-6)

    log: list[str] = []
    pool = RayPPOPool(state.make_model, state.rollout_spec, config, 2, 0, log.append)
    try:
        arrays, _ = pool.gather(state.learner.model, 0)  # actors up and acting
        assert arrays["obs"].shape[:2] == (128, 2 * 2)
        assert_learners_values(arrays)

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
        assert_learners_values(arrays)  # the restarted actor's segment included
    finally:
        pool.close()
