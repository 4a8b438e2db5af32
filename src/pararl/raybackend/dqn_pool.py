"""Ray actors as the async DQN learner's chunk source (`runners.dqn_async.ChunkSource`).

Each actor has two `sample` requests in flight, like the local actors' two outbox
slots: it acts on the next chunk while the learner takes the last one, and no
more — a new request goes out only when a chunk is taken, which is the same
back-pressure that keeps sampling matched to learning under the replay ratio.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from pararl.models import QNetwork
from pararl.raybackend.cluster import cluster_cpus, connect, disconnect
from pararl.raybackend.dqn_actor import DQNActor, numpy_state
from pararl.raybackend.pool import RayActorGroup
from pararl.replay import Transitions
from pararl.runners.dqn import DQNState
from pararl.samplers.dqn_actor import Chunk

IN_FLIGHT = 2  # sample requests per actor (double-buffered, as the local outbox)
# Transitions per chunk: twice the local actors' (a Ray call costs about 1 ms, a
# shared-memory slot microseconds), so weights change every 512 / envs vector steps.
RAY_CHUNK_TRANSITIONS = 512


def ray_dqn_actors(state: DQNState) -> int:
    """`--workers`, or every CPU of the cluster but one (the learner's)."""
    return state.config.workers or max(1, cluster_cpus() - 1)


class RayDQNPool:
    """DQN actors on Ray; the learner takes their chunks and publishes weights here."""

    def __init__(self, state: DQNState, report: Callable[[str], None] = print) -> None:
        from pararl.runners.dqn_async import actor_spec

        cfg = state.config
        connect(cfg.ray_address, cfg.workers or 1)
        try:
            n = ray_dqn_actors(state)
            steps = max(1, RAY_CHUNK_TRANSITIONS // cfg.envs_per_worker)
            specs = [
                dataclasses.replace(actor_spec(state, i, n), chunk_steps=steps) for i in range(n)
            ]
            seed = cfg.seed + 1000 * (1 + state.env_steps)
            self.group = RayActorGroup(
                DQNActor, lambda i: (specs[i], seed + 7 * i), n, report, cfg.ray_timeout_s
            )
        except BaseException:
            disconnect()
            raise
        self.num_actors, self.env_steps = n, state.env_steps
        self.received = 0  # transitions handed to the learner
        self.publish(state.learner.q, state.learner.updates)
        for index in range(n):
            for _ in range(IN_FLIGHT):
                self.group.submit(index, "sample", self.env_steps)

    @property
    def version(self) -> int:
        return self.group.version

    def publish(self, q: QNetwork, version: int) -> None:
        self.group.publish(lambda: numpy_state(q), version)

    def set_env_steps(self, env_steps: int) -> None:
        self.env_steps = env_steps

    def chunks(self, wait: float) -> Iterator[tuple[int, Transitions, Chunk]]:
        """Chunks that arrived within `wait` s; each taken one is replaced by a new
        request to its actor, sent with the newest weights."""
        for index, (batch, chunk) in self.group.results(wait):
            self.received += len(batch)
            yield index, batch, chunk
            self.group.submit(index, "sample", self.env_steps)

    def close(self) -> None:
        self.group.close()
        disconnect()
