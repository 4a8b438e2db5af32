"""DQN with Ray actors: trains as the serial loop does, within action masks; a killed
actor is restarted, the run goes on, the log says so, and every transition received
is stored. Each test starts its own actors (a Ray worker process each, which imports
torch: most of a test's time)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import pararl.envs  # noqa: F401 - registers the pararl/ ids
from pararl.algos.dqn import DQNState
from pararl.api import train
from pararl.config import DQNConfig
from pararl.runners.offpolicy import OffPolicyLoop, make_source

ray = pytest.importorskip("ray")

TINY = DQNConfig(
    backend="ray",
    workers=2,
    envs_per_worker=2,
    total_steps=2_000,
    learning_starts=500,
    eval_every=2_000,
    eval_episodes=1,
    hidden=(32,),
    progress="none",
    tensorboard=False,
)


def test_killed_actor_is_restarted_and_nothing_received_is_lost(two_nodes: str) -> None:
    config = dataclasses.replace(TINY, env="pararl/SlowStep-v0", buffer_size=50_000)
    env = gym.make(config.env)
    spaces = env.observation_space, env.action_space
    state = DQNState(config.for_spaces(*spaces), *spaces, torch.device("cpu"))
    env.close()
    log: list[str] = []
    pool = make_source(state, "async", log.append)
    loop = OffPolicyLoop(state, pool)
    try:
        nodes = ray.get([actor.node.remote() for actor in pool.group.actors], timeout=60)
        assert len(set(nodes)) == 2  # SPREAD: one actor per node
        counts, versions = [0, 0], [[], []]  # chunks and their weights versions per actor
        first: list[np.ndarray] = []  # actor 0's observations, chunk by chunk

        def take_until(done: object, timeout_s: float = 60.0) -> None:
            deadline = time.monotonic() + timeout_s
            while not done():  # type: ignore[operator]
                assert time.monotonic() < deadline, f"timed out; log: {log}"
                for index, transitions, chunk in pool.chunks(0.5):
                    state.replay.add(transitions)
                    state.env_steps += chunk.env_steps
                    counts[index] += 1
                    versions[index].append(chunk.version)
                    if index == 0:
                        first.append(np.array(transitions.obs))
                loop.learn(min(state.updates_due(), 4))

        take_until(lambda: min(counts) >= 1 and state.learner.updates > 0)
        version_at_kill = pool.version
        ray.kill(pool.group.actors[0], no_restart=False)
        before = counts[0]
        take_until(lambda: counts[0] >= before + 2 and any("died" in m for m in log))
        assert any(m.startswith("pararl: actor 0 died, restarted") for m in log), log
        assert pool.group.faults.deaths == {0: 1}  # one death, however many requests failed
        assert state.replay.added == pool.received  # every received transition stored
        assert counts[1] > 0
        assert state.learner.updates > 0
        # the restarted actor acts with weights at least as new as those at the kill
        assert versions[0][-1] >= version_at_kill > versions[0][0]
        # and its own streams: none of its chunks replays its first life's first one
        assert not any(np.array_equal(first[0], obs) for obs in first[before:])
    finally:
        loop.close()


def test_ray_agrees_with_the_serial_loop_and_acts_within_masks(
    two_nodes: str, tmp_path: Path
) -> None:
    """`pararl.train` with Ray actors: the same learner loop as serial mode with them
    as the chunk source: the same checkpoint layout, the budget spent, the replay ratio
    kept (up to the chunk that ended the run: 512 transitions of a Ray actor), an
    evaluation at the end; on the two-node cluster, which pararl leaves running. The
    env raises on an action outside its mask: the Ray actor explores (its epsilon's
    uniform actions) among the legal ones, and the transitions it sends keep their
    next masks for the target."""
    from pararl.runners.offpolicy import PUBLISH_EVERY
    from pararl.samplers.chunks.ray import RayChunkPool
    from tests.runners.saved import final_state
    from tests.runners.test_modes_agree import RUN, expected_updates, shapes

    run = {**RUN, "env": "pararl/MaskedChoice-v0"}
    train(DQNConfig(mode="serial", workers=1, seed=1, run_dir=tmp_path / "serial", **run))  # type: ignore[arg-type]
    config = DQNConfig(backend="ray", workers=1, seed=1, run_dir=tmp_path / "ray", **run)  # type: ignore[arg-type]
    session = train(config)
    assert '"backend": "ray"' in (tmp_path / "ray" / "config.json").read_text()
    assert session.last_eval is not None  # evaluated at the end of the budget
    assert ray.is_initialized()  # a Ray instance pararl did not start is left running
    serial, state = final_state(tmp_path / "serial"), final_state(tmp_path / "ray")
    assert shapes(state) == shapes(serial)
    assert config.total_steps <= state["env_steps"] <= config.total_steps + 512
    last_chunk = int(RayChunkPool.CHUNK_TRANSITIONS * config.replay_ratio)
    due = expected_updates(state["env_steps"])
    assert due - last_chunk - PUBLISH_EVERY <= state["learner"]["updates"] <= due
    replay = state["replay"]
    assert replay["added"] == len(replay["action"])
    assert replay["next_mask"].shape == (len(replay["action"]), 4)


def test_chunks_not_taken_wait_for_the_next_call_and_every_actor_is_asked_again() -> None:
    """Results of two actors arrive together; the loop takes one (its updates are
    due) and closes the iterator: the other is handed over by the next call, not lost,
    and each actor gets a new request once its chunk is taken."""
    from pararl.samplers.chunks.ray import RayChunkPool

    class Group:
        def __init__(self) -> None:
            self.finished = [(0, ([1, 2], "chunk 0")), (1, ([3], "chunk 1"))]
            self.submitted: list[int] = []

        def results(self, wait: float) -> list[tuple[int, object]]:
            out, self.finished = self.finished, []
            return out

        def submit(self, index: int, method: str, env_steps: int) -> None:
            self.submitted.append(index)

    pool = object.__new__(RayChunkPool)
    pool.group, pool.env_steps, pool.received, pool._held = Group(), 0, 0, []  # type: ignore[assignment]
    first = pool.chunks(0.0)
    assert next(first)[2] == "chunk 0"
    first.close()
    assert pool.group.submitted == [0]  # type: ignore[attr-defined]
    assert [c for _, _, c in pool.chunks(0.0)] == ["chunk 1"]
    assert pool.group.submitted == [0, 1]  # type: ignore[attr-defined]
    assert pool.received == 3
    assert list(pool.chunks(0.0)) == []
