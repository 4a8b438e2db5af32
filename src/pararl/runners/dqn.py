"""DQN: one learner loop over every way of acting (seeds/000's actors + one learner).

    while not done:
        if no update is due: take the chunks that arrived -> replay memory, env_steps
        learn the updates the replay ratio allows (a few at a time), publish weights
        log, evaluate, checkpoint (session.tick)

The chunks come from a `ChunkSource` (`samplers.chunks.source`), one per mode: `serial`
and `sync` act in this process on a `SerialVectorEnv` / `ParallelVectorEnv`
(`samplers.chunks.local`), `async` in actor processes (`samplers.chunks.actor_pool`), `--backend
ray` in Ray actors (`samplers.chunks.ray`). Parameter averaging runs this same loop in
every replica (`runners.averaging`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from pararl.algos.dqn import DQNState
from pararl.config import DQNConfig
from pararl.envs.make import env_factory
from pararl.errors import UsageError
from pararl.images import is_image
from pararl.models import num_params
from pararl.mp.topology import physical_cores
from pararl.replay.frame_steps import stack_size
from pararl.runners.session import TrainSession
from pararl.runners.setup import Plan, Prepared, resolve_device, set_learner_threads
from pararl.samplers.chunks.actor import ActorSpec
from pararl.samplers.chunks.actor_pool import ActorPool
from pararl.samplers.chunks.explore import EpsilonSchedule
from pararl.samplers.chunks.local import LocalChunkSource
from pararl.samplers.chunks.source import Chunk, ChunkSource
from pararl.vector import ParallelVectorEnv, SerialVectorEnv

CHUNK_TRANSITIONS = 256  # target transitions per chunk of an actor process
PUBLISH_EVERY = 4  # gradient updates between weight publications

# metrics.csv columns of a DQN run, beside the session's: the exploration, the
# learner's update (`algos.dqn`), the busy fractions and policy lag (`_BusyMeter`),
# the time of an average (`runners.averaging`)
METRICS = (
    "epsilon",
    "loss",
    "q_mean",
    "policy_lag",
    "actor_cpu",
    "learner_cpu",
    "sync_ms",
    "actor_version",
)


def resolve_mode(config: DQNConfig) -> str:
    if config.backend == "ray" and config.mode not in ("auto", "async"):
        raise UsageError(f"--backend ray runs async actors; drop --mode {config.mode}")
    if config.backend == "ray":
        return "async"
    if config.mode != "auto":
        return config.mode
    return "async" if physical_cores() > 1 else "serial"


def default_actors(config: DQNConfig) -> int:
    """One core is the learner's; the others act (at least one actor)."""
    return config.workers or max(1, physical_cores() - 1)


def epsilon_schedule(cfg: DQNConfig) -> EpsilonSchedule:
    s = cfg.settings
    return EpsilonSchedule(cfg.eps_start, s.eps_end, s.eps_decay_steps)


def actor_spec(
    state: DQNState,
    num_envs: int,
    chunk_steps: int,
    index: int = 0,
    num_actors: int = 1,
    apex: bool = False,
) -> ActorSpec:
    """Actor `index` of `num_actors`; `apex`: Ape-X (its own epsilon, and initial
    priorities computed with its Q copy)."""
    cfg = state.config
    schedule = epsilon_schedule(cfg)
    if cfg.apex_eps or apex:
        schedule = schedule.for_actor(index, num_actors)
    return ActorSpec(
        env_fn=env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs),
        num_envs=num_envs,
        obs_shape=state.obs_shape,
        obs_dtype=state.obs_dtype,
        num_actions=state.num_actions,
        make_q=state.make_model,
        n_step=state.settings.n_step,
        gamma=state.settings.gamma,
        chunk_steps=chunk_steps,
        sync_every=cfg.sync_every,
        epsilon=schedule,
        frame_stack=state.frame_stack,
        priorities=apex,
        stream_base=index * num_envs,
    )


def start_notes(state: DQNState, resumed: bool) -> tuple[str, ...]:
    """What a DQN run says at start: that it will not learn when `learning_starts`
    is not below the step budget; on resume, whether its replay memory was restored."""
    cfg, s = state.config, state.settings
    notes = []
    if s.learning_starts >= cfg.budget:
        notes.append(
            f"pararl: warning: --learning-starts {s.learning_starts:,} is not below "
            f"--total-steps {cfg.budget:,}: this run collects transitions and never "
            "learns; lower --learning-starts or raise --total-steps"
        )
    if resumed and state.replay.added:
        notes.append(f"pararl: replay memory restored ({len(state.replay):,} transitions)")
    elif resumed:
        notes.append(
            "pararl: this checkpoint has no replay memory (only final and interrupted "
            f"save it): the run refills {s.learning_starts:,} transitions before it "
            "learns again"
        )
    return tuple(notes)


def frame_stack(cfg: DQNConfig, observation_space: gym.Space) -> int:
    """How many frames the env's image observations stack (0: not stacked frames)."""
    if not is_image(observation_space):
        return 0
    env = env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)()
    try:
        return stack_size(env)
    finally:
        env.close()


def local_source(
    state: DQNState, envs: SerialVectorEnv | ParallelVectorEnv, path: tuple[int, ...]
) -> LocalChunkSource:
    """Acting in this process on `envs`, one vector step per chunk, with the
    learner's network (or a CPU copy of it when the learner is elsewhere)."""
    q = state.learner.q
    on_cpu = state.learner.device.type == "cpu"
    acting = q if on_cpu else state.make_model()
    spec = actor_spec(state, envs.num_envs, chunk_steps=1)
    source = LocalChunkSource(spec, envs, acting, state.learner.updates, state.config.seed, path)
    source.publish(q, state.learner.updates)
    return source


def make_source(state: DQNState, mode: str, report: Callable[[str], None]) -> ChunkSource:
    """The chunk source of `mode` (and `--backend`)."""
    cfg, learner = state.config, state.learner
    if cfg.backend == "ray":
        from pararl.samplers.chunks.ray import RayDQNPool
        from pararl.samplers.ray.cluster import ray_actors

        n = ray_actors(cfg.workers, cfg.ray_address, keep_for_learner=1)
        steps = max(1, RayDQNPool.CHUNK_TRANSITIONS // cfg.envs_per_worker)
        specs = [
            actor_spec(state, cfg.envs_per_worker, steps, i, n, cfg.prioritized) for i in range(n)
        ]
        return RayDQNPool(specs, learner.q, learner.updates, cfg, state.env_steps, report)
    if mode == "async":
        n = default_actors(cfg)
        steps = max(1, CHUNK_TRANSITIONS // cfg.envs_per_worker)
        specs = [
            actor_spec(state, cfg.envs_per_worker, steps, i, n, cfg.prioritized) for i in range(n)
        ]
        return ActorPool(
            specs, learner.q, learner.updates, cfg.seed, state.env_steps, cfg.restart_actors, report
        )
    workers = cfg.workers or physical_cores()
    fns = [env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)] * (
        workers * cfg.envs_per_worker
    )
    envs = SerialVectorEnv(fns) if mode == "serial" else ParallelVectorEnv(fns, num_workers=workers)
    try:
        return local_source(state, envs, (0, 0, state.env_steps))
    except BaseException:
        envs.close()
        raise


class DQNLoop:
    """The learner: chunks in, gradient updates, weights out; see the module doc."""

    def __init__(self, state: DQNState, source: ChunkSource) -> None:
        self.state, self.source = state, source
        self.meter = _BusyMeter(source.num_actors)
        self.episode_returns: list[float] = []
        self.stats: dict[str, Any] = {}
        self.free = state.settings.replay_ratio == 0

    def iterate(self) -> None:
        """One turn. With a replay ratio, take in data only while learning keeps up
        with it: actors wait on their full outboxes otherwise (back-pressure).
        Without one (`replay_ratio` 0): take what has arrived, learn, repeat."""
        due = (1 if self.state.can_learn() else 0) if self.free else self.state.updates_due()
        if due == 0 or self.free:
            self.take(wait=0.0 if due else 0.5)
        self.learn(min(due, PUBLISH_EVERY))

    def take(self, wait: float) -> None:
        """Move arrived chunks (waiting up to `wait` s) into the replay memory; the
        run's step count advances by what they hold. None is taken past the step
        budget: however many actors, a run ends at most one chunk beyond it."""
        source, state = self.source, self.state
        for index, transitions, chunk in source.chunks(wait):
            state.replay.add(transitions)  # copies the rows before the slot is freed
            state.env_steps += chunk.env_steps
            self.episode_returns.extend(chunk.episode_returns)
            self.meter.chunk(index, chunk, source.version)
            if state.env_steps >= state.config.budget:
                break
        source.set_env_steps(state.env_steps)

    def learn(self, count: int) -> None:
        """`count` gradient updates, then publish the weights."""
        if count == 0:
            return
        state, start = self.state, time.monotonic()
        for _ in range(count):
            self.stats = state.update()
        self.source.publish(state.learner.q, state.learner.updates)
        self.meter.learner_busy += time.monotonic() - start

    def log_stats(self) -> dict[str, Any]:
        epsilon = epsilon_schedule(self.state.config)(self.state.env_steps)
        return {**self.stats, **self.meter.report(epsilon)}

    def close(self) -> None:
        self.source.close()


def run_loop(loop: DQNLoop, session: TrainSession) -> None:
    """The loop until the session says done (solved, or the step budget spent)."""
    state = loop.state
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


def plan(p: Prepared) -> Plan:
    """A single-learner DQN run (serial, sync, async, Ray)."""
    cfg: DQNConfig = p.config
    device = resolve_device(cfg.device)
    mode = resolve_mode(cfg)
    stack = frame_stack(cfg, p.observation_space)
    state = DQNState(
        p.filled, p.observation_space, p.action_space, device, p.resume_state, frame_stack=stack
    )
    busy = 0 if mode == "serial" else (cfg.workers or physical_cores())
    threads = set_learner_threads(num_params(state.learner.q), busy)
    resolved = {
        "mode": mode,
        "device": str(device),
        "step_mode": state.learner.step_mode,
        "learner_threads": threads,
        "replay": type(state.replay).__name__,
    }
    loops: list[DQNLoop] = []

    def run(session: TrainSession) -> None:
        loops.append(DQNLoop(state, make_source(state, mode, session.console.message)))
        run_loop(loops[0], session)

    def close() -> None:
        for loop in loops:
            loop.close()

    return Plan(
        banner=f"pararl: DQN on {cfg.env}, mode {mode}, learner on {device}"
        + (f" (step: {state.learner.step_mode})" if state.learner.step_mode != "eager" else ""),
        metrics=METRICS,
        resolved=resolved,
        make_model=state.make_model,
        start=(state.env_steps, state.wall_s),
        run=run,
        steps=lambda: state.env_steps,
        checkpoint=lambda wall_s: state.state(True, wall_s),
        close=close,
        notes=start_notes(state, p.resume_state is not None),
    )


class _BusyMeter:
    """Actor and learner busy fractions, policy lag and the weights version actors
    acted with, over the last log interval."""

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


__all__ = [
    "METRICS",
    "PUBLISH_EVERY",
    "DQNLoop",
    "default_actors",
    "make_source",
    "plan",
    "run_loop",
    "start_notes",
]
