"""SAC with a Ray actor, on the same chunk pool as DQN's: it trains with actions in
the env's bounds, and every transition received is in the replay memory. The pool's
actors spread over the nodes and a killed one is restarted and loses nothing
(tests/samplers/ray/test_chunks.py, with DQN's actors: each actor is a Ray worker
process that imports torch, seconds of CPU), and what `pararl.train` adds around the
pool is the same for DQN, SAC and TD3 (checked with Ray in test_chunks.py and
test_td3.py)."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest
import torch

from pararl.algos.sac import SACState
from pararl.config import SACConfig
from pararl.runners.offpolicy import OffPolicyLoop, make_source

ray = pytest.importorskip("ray")

TINY = SACConfig(
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


def test_sac_trains_on_a_ray_actor_within_the_action_bounds(two_nodes: str) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as `pararl train` sets it for small networks
    try:
        _train()
    finally:
        torch.set_num_threads(threads)


def _train() -> None:
    env = gym.make(TINY.env)
    spaces = env.observation_space, env.action_space
    env.close()
    state = SACState(TINY.for_spaces(*spaces), *spaces, torch.device("cpu"))
    log: list[str] = []
    pool = make_source(state, "async", log.append)
    loop = OffPolicyLoop(state, pool)
    try:
        counts = [0]

        def take_until(done: object, timeout_s: float = 60.0) -> None:
            deadline = time.monotonic() + timeout_s
            while not done():  # type: ignore[operator]
                assert time.monotonic() < deadline, f"timed out; log: {log}"
                for index, transitions, chunk in pool.chunks(0.5):
                    state.replay.add(transitions)
                    state.env_steps += chunk.env_steps
                    counts[index] += 1
                loop.learn(min(state.updates_due(), 4))

        take_until(lambda: counts[0] >= 2 and state.learner.updates > 0)
        assert not any("died" in m for m in log), log
        assert state.replay.added == pool.received
        assert state.learner.updates > 0
        actions = state.replay.action[: len(state.replay)]
        assert actions.shape[1:] == (1,)  # Pendulum's one continuous action
        assert (abs(actions) <= 2).all()  # within its bounds
    finally:
        loop.close()
