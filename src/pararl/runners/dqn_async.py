"""Async DQN: actor processes act while the learner learns (seeds/000, done right).

Actors (`samplers.dqn_actor`) each step a batch of envs with a CPU copy of the
Q-network and send n-step transitions in chunks through shared memory. The
learner, here, copies arrived chunks into the replay memory, takes as many
gradient steps as the replay ratio allows, and publishes new weights through
shared memory; actors pick them up every `sync_every` steps.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import numpy as np

from pararl.config import DQNConfig
from pararl.envs.make import env_factory
from pararl.models import QNetwork
from pararl.mp.procs import ProcessGroup
from pararl.mp.shared import SharedArrays
from pararl.replay import Transitions
from pararl.runners.dqn import DQNState
from pararl.runners.session import TrainSession
from pararl.samplers.dqn_actor import ActorSpec, Chunk, actor_main, outbox_specs, read_slot
from pararl.samplers.weights import WeightPublisher, weight_specs
from pararl.vector import WorkerError, physical_cores

CHUNK_TRANSITIONS = 256  # target transitions per chunk (one pipe message each)
PUBLISH_EVERY = 4  # gradient updates between weight publications


def actor_spec(state: DQNState, index: int, num_actors: int) -> ActorSpec:
    cfg = state.config
    fixed_eps = None
    if cfg.apex_eps:
        fixed_eps = 0.4 ** (1 + 7 * index / max(1, num_actors - 1))
    return ActorSpec(
        env_fn=env_factory(cfg.env, cfg.wrapper),
        num_envs=cfg.envs_per_worker,
        obs_shape=state.obs_shape,
        num_actions=state.num_actions,
        hidden=cfg.hidden,
        n_step=cfg.n_step,
        gamma=cfg.gamma,
        chunk_steps=max(1, CHUNK_TRANSITIONS // cfg.envs_per_worker),
        sync_every=cfg.sync_every,
        eps_start=cfg.eps_start,
        eps_end=cfg.eps_end,
        eps_span=float(cfg.eps_decay_steps),
        fixed_eps=fixed_eps,
    )


def default_actors(config: DQNConfig) -> int:
    """One core is the learner's; the others act (at least one actor)."""
    return config.workers or max(1, physical_cores() - 1)


class ChunkSource(Protocol):
    """Where the learner's chunks come from: the local `ActorPool`, or Ray actors
    (`pararl.raybackend.dqn_pool.RayDQNPool`). The learner loop is the same for both."""

    @property
    def version(self) -> int:
        """The weights version last published."""

    def chunks(self, wait: float) -> Iterator[tuple[int, Transitions, Chunk]]:
        """(actor index, transitions, chunk) for the chunks that arrived within `wait`
        s; the transitions may be a view that is reused once the caller asks for
        the next item, so copy them first. Handles failed actors as configured."""

    def publish(self, q: QNetwork, version: int) -> None:
        """Make these weights the ones actors act with from now on."""

    def set_env_steps(self, env_steps: int) -> None:
        """The run's env-step count (actors' epsilon schedules follow it)."""

    def close(self) -> None: ...


class ActorPool:
    """The actor processes and their shared memory (outboxes + published weights)."""

    def __init__(
        self, state: DQNState, num_actors: int, report: Callable[[str], None] = print
    ) -> None:
        self.report = report
        self.specs = [actor_spec(state, i, num_actors) for i in range(num_actors)]
        specs = weight_specs(state.learner.q)
        for i, spec in enumerate(self.specs):
            specs.update(outbox_specs(i, spec))
        ctx = mp.get_context()
        self.shared = SharedArrays(specs, ctx)
        self.arrays = self.shared.arrays
        self.publisher = WeightPublisher(self.arrays)
        self.publisher.publish(state.learner.q, state.learner.updates)
        self.seed, self.restarts = state.config.seed + 1000 * (1 + state.env_steps), 0
        self.restart_actors = state.config.restart_actors
        self.group = ProcessGroup(
            actor_main, [self._args(i) for i in range(num_actors)], ctx, name="pararl-actor"
        )
        self.group.await_ready(120.0)

    def _args(self, index: int) -> tuple[Any, ...]:
        return (
            index,
            self.specs[index],
            self.shared,
            self.seed + 7 * index + 1_000_003 * self.restarts,
        )

    def restart(self, index: int) -> None:
        self.restarts += 1
        self.group.restart(index, self._args(index))
        self.group.await_ready(120.0)  # all others are ready already

    @property
    def version(self) -> int:
        return self.publisher.version

    def publish(self, q: QNetwork, version: int) -> None:
        self.publisher.publish(q, version)

    def set_env_steps(self, env_steps: int) -> None:
        self.arrays["env_steps"][0] = env_steps

    def chunks(self, wait: float) -> Iterator[tuple[int, Transitions, Chunk]]:
        """Arrived chunks as views of their outbox slots; a slot is acked (freed) once
        the caller asks for the next chunk. A failed actor is replaced if
        `--restart-actors`, else raised."""
        try:
            for index in self.group.ready(range(len(self.group)), wait):
                chunk: Chunk = self.group.receive(index)
                yield index, read_slot(self.arrays, index, chunk.slot, chunk.count), chunk
                self.group.send(index, ("ack", chunk.slot))
        except WorkerError as exc:
            if not self.restart_actors:
                raise
            first_line = str(exc).splitlines()[0]
            self.report(
                f"pararl: actor {exc.worker} failed ({first_line}); restarting it, replay data kept"
            )
            self.restart(exc.worker)

    def close(self) -> None:
        self.group.close()


class AsyncDQN:
    """The learner side of async DQN: actor chunks in, gradient updates, weights out.

    `iterate` is one turn of the production loop; `take` and `learn` are its two
    halves, also used on their own by the benchmark (actors alone, learner alone).
    """

    def __init__(
        self,
        state: DQNState,
        num_actors: int,
        report: Callable[[str], None] = print,
        source: ChunkSource | None = None,
    ) -> None:
        self.state, self.report = state, report
        self.pool: ChunkSource = source or ActorPool(state, num_actors, report)
        self.meter = _BusyMeter(num_actors)
        self.episode_returns: list[float] = []
        self.stats: dict[str, Any] = {}

    def iterate(self, free: bool | None = None) -> None:
        """One turn. With a replay ratio, take in data only while learning keeps up
        with it: actors wait on their full outboxes otherwise (back-pressure). Free
        (`replay_ratio` 0, or `free=True`): take what has arrived, learn, repeat."""
        free = self.state.config.replay_ratio == 0 if free is None else free
        due = 1 if free and self.state.can_learn() else self.state.updates_due()
        if due == 0 or free:
            self.take(wait=0.0 if due else 0.5)
        self.learn(min(due, PUBLISH_EVERY))

    def learn(self, count: int) -> None:
        """`count` gradient updates, then publish the weights."""
        if count == 0:
            return
        state, start = self.state, time.monotonic()
        for _ in range(count):
            batch = state.replay.sample(state.config.batch_size, state.rng)
            self.stats = state.learner.update(batch)
        self.pool.publish(state.learner.q, state.learner.updates)
        self.meter.learner_busy += time.monotonic() - start

    def take(self, wait: float) -> None:
        """Move arrived chunks (waiting up to `wait` s) into the replay memory."""
        pool, state = self.pool, self.state
        for index, transitions, chunk in pool.chunks(wait):
            state.replay.add(transitions)  # copies the rows before the slot is freed
            state.env_steps += chunk.env_steps
            self.episode_returns.extend(chunk.episode_returns)
            self.meter.chunk(index, chunk, pool.version)
        pool.set_env_steps(state.env_steps)

    def log_stats(self) -> dict[str, Any]:
        epsilon = self.state.config.epsilon(self.state.env_steps)
        return {**self.stats, **self.meter.report(epsilon)}

    def close(self) -> None:
        self.pool.close()


def make_loop(state: DQNState, report: Callable[[str], None]) -> AsyncDQN:
    """The learner loop over local actor processes, or over Ray actors."""
    if state.config.backend == "ray":
        from pararl.raybackend.dqn_pool import RayDQNPool

        pool = RayDQNPool(state, report)
        return AsyncDQN(state, pool.num_actors, report, pool)
    return AsyncDQN(state, default_actors(state.config), report)


def run_async(state: DQNState, session: TrainSession, mode: str) -> None:
    """Actors act in their processes; here the learner learns, until done."""
    loop = make_loop(state, session.console.message)
    try:
        while not session.done(state.env_steps):
            loop.iterate()
            session.episode_returns.extend(loop.episode_returns)
            loop.episode_returns.clear()
            session.tick(
                state.env_steps,
                state.learner.updates,
                state.learner.q,
                lambda: state.state(False, session.wall_s),
                loop.log_stats,
            )
    finally:
        loop.close()


class _BusyMeter:
    """Actor and learner busy fractions and policy lag, over the last log interval."""

    def __init__(self, num_actors: int) -> None:
        self.busy = np.zeros(num_actors)
        self.lags: list[int] = []
        self.acted_version = -1  # newest weights version an actor acted with
        self.learner_busy = 0.0
        self._since = time.monotonic()

    def chunk(self, index: int, chunk: Chunk, version: int) -> None:
        self.busy[index] += chunk.busy_s
        self.lags.append(version - chunk.version)  # in gradient updates
        self.acted_version = max(self.acted_version, chunk.version)

    def report(self, epsilon: float) -> dict[str, Any]:
        now = time.monotonic()
        span, self._since = now - self._since, now
        row = {
            "epsilon": epsilon,
            "actor_cpu": float(self.busy.sum() / max(span * len(self.busy), 1e-9)),
            "learner_cpu": self.learner_busy / max(span, 1e-9),
            "policy_lag": float(np.mean(self.lags)) if self.lags else None,
            "actor_version": self.acted_version if self.acted_version >= 0 else None,
        }
        self.busy[:], self.lags, self.learner_busy = 0.0, [], 0.0
        return {k: v for k, v in row.items() if v is not None}
