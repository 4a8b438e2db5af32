"""PPO with Ray actors: each update, every actor returns a rollout segment acted
with the current weights; the segments make one rollout, and the same PPO update
and session code as the local path run on it (`runners.ppo.train_loop`).

PPO is on-policy, so this is synchronous: the driver waits for all segments of a
version. If an actor dies, the segments already received are kept and the lost one
is asked for again from the restarted actor, with the same weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from pararl.raybackend.cluster import cluster_cpus, connect, disconnect
from pararl.raybackend.dqn_actor import numpy_state
from pararl.raybackend.pool import RayActorGroup
from pararl.raybackend.ppo_actor import PPOActor, Segment

if TYPE_CHECKING:
    from pararl.runners.ppo import PPOState
    from pararl.runners.session import TrainSession

WAIT_S = 1.0


def ray_ppo_actors(workers: int | None, address: str | None) -> int:
    """`--workers`, or every CPU of the cluster (the driver waits while they act)."""
    connect(address, workers or 1)
    return workers or cluster_cpus()


class RayPPOPool:
    """PPO actors on Ray; `gather` returns the rollout of one weights version."""

    def __init__(self, state: PPOState, num_actors: int, report: Callable[[str], None]) -> None:
        cfg = state.config
        connect(cfg.ray_address, num_actors)
        try:
            seed = cfg.seed + 1000 * (1 + state.env_steps)
            self.group = RayActorGroup(
                PPOActor,
                lambda i: (cfg, cfg.envs_per_worker, seed + cfg.envs_per_worker * i),
                num_actors,
                report,
                cfg.ray_timeout_s,
            )
        except BaseException:
            disconnect()
            raise
        self.state = state
        self.received = 0  # env steps in segments received

    def gather(self) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
        """One segment from every actor with the current weights, concatenated in
        actor order; and the infos of the episodes that ended."""
        learner = self.state.learner
        self.group.publish(lambda: numpy_state(learner.model), learner.updates)
        for index in range(len(self.group)):
            self.group.submit(index, "rollout")
        segments: dict[int, Segment] = {}
        while len(segments) < len(self.group):
            for index, segment in self.group.results(WAIT_S):
                segments[index] = segment
                self.received += segment.env_steps
        ordered = [segments[i] for i in range(len(self.group))]
        self.state.env_steps += sum(s.env_steps for s in ordered)
        batch = {k: np.concatenate([s.batch[k] for s in ordered]) for k in ordered[0].batch}
        return batch, [info for s in ordered for info in s.episodes]

    def close(self) -> None:
        self.group.close()
        disconnect()


def run_ppo_ray(state: PPOState, session: TrainSession, num_actors: int) -> None:
    """The PPO training loop with Ray actors collecting the rollouts."""
    from pararl.runners.ppo import train_loop

    pool = RayPPOPool(state, num_actors, session.console.message)

    def gather() -> dict[str, np.ndarray]:
        batch, episodes = pool.gather()
        for infos in episodes:
            session.record_episodes(infos)
        return batch

    try:
        train_loop(state, session, gather)
    finally:
        pool.close()
