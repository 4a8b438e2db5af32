"""The off-policy learner loop, one for DQN, SAC and TD3 (the multi-process DQN post's
actors + one learner, docs/design/sources.md):

    while not done:
        if no update is due: take the chunks that arrived -> replay memory, env_steps
        learn the updates the replay ratio allows (a few at a time), publish weights
        log, evaluate, checkpoint (session.tick)

What differs between the algorithms sits behind two small interfaces. The learner's
side is `Learning` (below; `algos.dqn.DQNState`, `algos.sac.SACState`): its replay
memory, the updates due, one update, the network actors act with, and how they act
with it (an `ActingPolicy`, `samplers.chunks.explore`: DQN's epsilon-greedy Q copy,
SAC's squashed Gaussian with random first steps). The chunks come from a
`ChunkSource` (`samplers.chunks.source`), one per mode, the same for both: `serial`
and `sync` act in this process on a `SerialVectorEnv` / `ParallelVectorEnv`
(`samplers.chunks.local`), `async` in actor processes (`samplers.chunks.actor_pool`),
`--backend ray` in Ray actors (`samplers.chunks.ray`). Weights go to the actors
through the source's `WeightSender` (`weights/`). DQN's parameter averaging runs
this same loop in every replica (`runners.averaging`).

The replay ratio (updates per env step, after `learning_starts`) holds in every mode,
within a bound: the learner never runs ahead of the data it has taken (an update is
made only when due), and takes new data only once it has caught up, so it is behind
by at most the updates one turn's chunks allow: ratio x (serial/sync: the envs of one
vector step; async: actors x one chunk, `CHUNK_UPDATES` updates' worth: 256
transitions at DQN's quarter update per step, 64 at MinAtar DQN's, SAC's and TD3's one;
Ray: 2 x actors x twice that). Actors wait on full outboxes beyond that (back-pressure);
nothing is dropped. `updates_behind` in the metrics is the lag at each log line.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from pararl.algos.fused import FusedSteps, StepMode, resolve_step_mode
from pararl.config import RunConfig
from pararl.devices import resolve_device
from pararl.envs.make import env_factory
from pararl.errors import UsageError
from pararl.models import num_params
from pararl.mp.threads import (
    AdaptiveThreads,
    held,
    is_convolutional,
    set_learner_threads,
    takes_every_core,
)
from pararl.mp.topology import physical_cores
from pararl.observations import Leaf, stored
from pararl.replay.make import Replay
from pararl.runners.session import TrainSession
from pararl.runners.setup import Plan, Prepared, encoder_note
from pararl.samplers.chunks.actor_pool import ActorPool
from pararl.samplers.chunks.explore import ActingPolicy
from pararl.samplers.chunks.local import LocalChunkSource
from pararl.samplers.chunks.sampler import ActorSpec
from pararl.samplers.chunks.source import Chunk, ChunkSource
from pararl.vector import ParallelVectorEnv, SerialVectorEnv

CHUNK_TRANSITIONS = 256  # transitions per chunk of an actor process without a replay ratio
CHUNK_UPDATES = 64  # ... and with one: this many gradient updates' worth (`chunk_for`)
PUBLISH_EVERY = 4  # gradient updates between weight publications

# metrics.csv columns of every off-policy run, beside the session's and the
# algorithm's own: the busy fractions and policy lag (`BusyMeter`), how far the
# learner is behind the replay ratio, its threads now (`AdaptiveThreads`)
METRICS = (
    "policy_lag",
    "actor_cpu",
    "learner_cpu",
    "actor_version",
    "updates_behind",
    "learner_threads",
)


class Learner(Protocol):
    @property
    def device(self) -> torch.device: ...

    @property
    def updates(self) -> int:
        """Gradient updates done: the version of the weights it publishes."""

    @property
    def step_mode(self) -> str:
        """How its gradient step runs (`algos.fused`)."""

    @property
    def steps(self) -> FusedSteps[Any]:
        """Its fused steps (their compile and record seconds)."""


class Learning(Protocol):
    """The learner's side of the loop: what DQN's, SAC's and TD3's run states share."""

    config: Any  # a RunConfig with the off-policy fields (mode, sync_every, ...)
    settings: Any  # the kind-dependent fields: replay_ratio, n_step, gamma, ...
    replay: Replay
    env_steps: int
    wall_s: float  # of the run so far (a resumed run's checkpoint)
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    frame_stack: int  # > 0: stacked image frames, stored once
    mask_size: int  # > 0: the env's action masks, stored with the transitions
    mask_info: dict[str, np.ndarray] | None  # the vector envs' `shared_infos` then
    leaves: tuple[Leaf, ...]  # what the encoder reads (Dict and Tuple: stored leaf by leaf)

    @property
    def learner(self) -> Learner: ...

    @property
    def make_model(self) -> Callable[[], nn.Module]:
        """The acting network's constructor (actors, evaluation)."""

    @property
    def acting_net(self) -> nn.Module:
        """The network actors act with and evaluations run (its weights are published)."""

    def acting_policy(self, index: int, num_actors: int, apex: bool) -> ActingPolicy:
        """How actor `index` of `num_actors` acts (`apex`: Ape-X priorities asked for)."""

    def acting_stats(self) -> dict[str, float]:
        """The exploration now, for the log (DQN: epsilon)."""

    def can_learn(self) -> bool: ...

    def updates_due(self) -> int: ...

    def update(self) -> dict[str, torch.Tensor]: ...

    def state(self, with_replay: bool = True, wall_s: float = 0.0) -> dict[str, Any]: ...


def resolve_mode(config: RunConfig) -> str:
    mode: str = getattr(config, "mode", "auto")
    if config.backend == "ray" and mode not in ("auto", "async"):
        raise UsageError(f"--backend ray runs async actors; drop --mode {mode}")
    if config.backend == "ray":
        return "async"
    if mode != "auto":
        return mode
    return "async" if physical_cores() > 1 else "serial"


def default_actors(config: RunConfig) -> int:
    """One core is the learner's; the others act (at least one actor)."""
    return config.workers or max(1, physical_cores() - 1)


def actor_spec(
    state: Learning,
    num_envs: int,
    chunk_steps: int,
    index: int = 0,
    num_actors: int = 1,
    apex: bool = False,
) -> ActorSpec:
    """Actor `index` of `num_actors`; `apex`: Ape-X, if the algorithm has it (DQN: its
    own epsilon, and initial priorities computed with its Q copy)."""
    cfg = state.config
    return ActorSpec(
        env_fn=env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs),
        num_envs=num_envs,
        obs_shape=state.obs_shape,
        obs_dtype=state.obs_dtype,
        policy=state.acting_policy(index, num_actors, apex),
        n_step=state.settings.n_step,
        gamma=state.settings.gamma,
        chunk_steps=chunk_steps,
        sync_every=cfg.sync_every,
        frame_stack=state.frame_stack,
        stream_base=index * num_envs,
        mask_size=state.mask_size,
        leaves=stored(state.leaves),
    )


def local_source(
    state: Learning, envs: SerialVectorEnv | ParallelVectorEnv, path: tuple[int, ...]
) -> LocalChunkSource:
    """Acting in this process on `envs`, one vector step per chunk, with the
    learner's acting network (or a CPU copy of it when the learner is elsewhere, or
    when `--acting-lag` has it trail the learner)."""
    cfg, net = state.config, state.acting_net
    on_cpu = state.learner.device.type == "cpu"
    acting = net if on_cpu and not cfg.acting_lag else state.make_model()
    spec = actor_spec(state, envs.num_envs, chunk_steps=1)
    source = LocalChunkSource(
        spec, envs, acting, state.learner.updates, cfg.seed, path, cfg.acting_lag
    )
    source.set_env_steps(state.env_steps)  # a resumed run explores as far as it got
    source.publish(net, state.learner.updates)
    return source


def chunk_for(replay_ratio: float) -> int:
    """Transitions in an actor process's chunk: `CHUNK_UPDATES` updates' worth at the
    run's replay ratio (256 at a quarter of an update per env step, DQN's on vectors and
    Atari frames; 64 at one, MinAtar DQN's, SAC's and TD3's), so that the data trails the
    learner by about as many updates whatever the ratio. An actor fills both outbox
    slots and waits: it acts up to three chunks' updates behind the learner, ~200.
    Without a ratio (`--replay-ratio 0`), `CHUNK_TRANSITIONS`."""
    if replay_ratio <= 0:
        return CHUNK_TRANSITIONS
    return max(1, round(CHUNK_UPDATES / replay_ratio))


def make_source(
    state: Learning,
    mode: str,
    report: Callable[[str], None],
) -> ChunkSource:
    """The chunk source of `mode` (and `--backend`); an actor process's chunks hold
    about `chunk_for(replay ratio)` transitions (a Ray actor's, twice as many)."""
    cfg, learner, net = state.config, state.learner, state.acting_net
    chunk_transitions = chunk_for(state.settings.replay_ratio)
    if state.settings.replay_ratio == 0 and mode != "async":
        raise UsageError(
            f"--replay-ratio 0 (learn without a ratio) needs --mode async, not {mode}: "
            "here acting and learning take turns, so give a ratio (updates per env step)"
        )
    if cfg.acting_lag and mode == "async":  # `--backend ray` resolves to async too
        raise UsageError(
            "--acting-lag is for --mode serial or sync: async actors trail the learner "
            "by their chunks already (policy_lag in metrics.csv)"
        )
    if cfg.backend == "ray":
        from pararl.samplers.chunks.ray import RayChunkPool
        from pararl.samplers.ray.cluster import ray_actors

        n = ray_actors(cfg.workers, cfg.ray_address, keep_for_learner=1)
        ray_chunk = RayChunkPool.CHUNK_TRANSITIONS * chunk_transitions // CHUNK_TRANSITIONS
        steps = max(1, ray_chunk // cfg.envs_per_worker)
        specs = [
            actor_spec(state, cfg.envs_per_worker, steps, i, n, cfg.prioritized) for i in range(n)
        ]
        return RayChunkPool(specs, net, learner.updates, cfg, state.env_steps, report)
    if mode == "async":
        n = default_actors(cfg)
        steps = max(1, chunk_transitions // cfg.envs_per_worker)
        specs = [
            actor_spec(state, cfg.envs_per_worker, steps, i, n, cfg.prioritized) for i in range(n)
        ]
        return ActorPool(
            specs, net, learner.updates, cfg.seed, state.env_steps, cfg.restart_actors, report
        )
    workers = cfg.workers or physical_cores()
    fns = [env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)] * (
        workers * cfg.envs_per_worker
    )
    masks = state.mask_info  # action masks travel in shared memory (`envs.masks`)
    envs = (
        SerialVectorEnv(fns, shared_infos=masks)
        if mode == "serial"
        else ParallelVectorEnv(fns, num_workers=workers, shared_infos=masks)
    )
    try:
        return local_source(state, envs, (0, 0, state.env_steps))
    except BaseException:
        envs.close()
        raise


class OffPolicyLoop:
    """The learner: chunks in, gradient updates, weights out; see the module doc."""

    def __init__(
        self, state: Learning, source: ChunkSource, threads: AdaptiveThreads | None = None
    ) -> None:
        self.state, self.source = state, source
        # the learner's threads, re-decided as it runs (held at torch's count if not given)
        self.threads = threads or AdaptiveThreads(torch.get_num_threads(), hold=True)
        self.meter = BusyMeter(source.num_actors)
        self.episode_returns: list[float] = []
        self.stats: dict[str, Any] = {}
        self.free = state.settings.replay_ratio == 0

    def iterate(self) -> None:
        """One turn. With a replay ratio, take in data only while learning keeps up
        with it: actors wait on their full outboxes otherwise (back-pressure).
        Without one (`replay_ratio` 0): take what has arrived, learn `PUBLISH_EVERY`
        updates (then publish), repeat."""
        if self.free:
            due = PUBLISH_EVERY if self.state.can_learn() else 0
        else:
            due = self.state.updates_due()
        if due == 0 or self.free:
            self.take(wait=0.0 if due else 0.5)
        self.learn(min(due, PUBLISH_EVERY))

    def take(self, wait: float) -> None:
        """Move arrived chunks (waiting up to `wait` s) into the replay memory; the
        run's step count advances by what they hold. With a replay ratio, none is
        taken once updates are due (the rest wait for them: chunks that arrived
        together, while a loaded learner was slow, would otherwise count their steps
        at once, and a run could reach its budget before the updates of the first);
        none past the step budget: however many actors, a run ends at most one chunk
        beyond it."""
        source, state = self.source, self.state
        with contextlib.closing(source.chunks(wait)) as arrived:  # what is left, freed
            for index, transitions, chunk in arrived:
                state.replay.add(transitions)  # copies the rows before the slot is freed
                state.env_steps += chunk.env_steps
                self.episode_returns.extend(chunk.episode_returns)
                self.meter.chunk(index, chunk, source.version)
                if state.env_steps >= state.config.budget:
                    break
                if not self.free and state.updates_due() > 0:
                    break
        source.set_env_steps(state.env_steps)

    def learn(self, count: int) -> None:
        """`count` gradient updates, then publish the weights."""
        if count == 0:
            return
        state, start = self.state, time.monotonic()
        elapsed = state.learner.steps.stopwatch()
        for _ in range(count):
            self.stats = state.update()
        self.threads.record(count, elapsed())
        self.source.publish(state.acting_net, state.learner.updates)
        self.meter.learner_busy += time.monotonic() - start

    def log_stats(self) -> dict[str, Any]:
        behind = {} if self.free else {"updates_behind": self.state.updates_due()}
        return {
            **self.stats,
            **self.meter.report(),
            **self.state.acting_stats(),
            **behind,
            "learner_threads": self.threads.threads,
        }

    def close(self) -> None:
        self.source.close()


def run_loop(loop: OffPolicyLoop, session: TrainSession) -> None:
    """The loop until the session says done (solved, or the step budget spent)."""
    state = loop.state
    while not session.done(state.env_steps):
        loop.iterate()
        session.episode_returns.extend(loop.episode_returns)
        loop.episode_returns.clear()
        session.tick(
            state.env_steps,
            state.learner.updates,
            state.acting_net,
            lambda: state.state(False, session.wall_s),
            loop.log_stats,
        )


def start_notes(state: Learning, resumed: bool) -> tuple[str, ...]:
    """What an off-policy run says at start: which network reads each leaf of Dict
    and Tuple observations; that it will not learn when `learning_starts` is not
    below the step budget; on resume, whether its replay memory was restored."""
    cfg, s = state.config, state.settings
    notes = list(encoder_note(state.acting_net))
    if state.leaves and any(leaf.kind == "image" for leaf in state.leaves):
        notes.append(
            "pararl: the replay memory stores each leaf whole (an image leaf twice per "
            "transition, not frame by frame)"
        )
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
            "learns again, at its replay ratio from there"
        )
    return tuple(notes)


# (filled config, observation space, action space, device, resumed state, step mode)
StateFactory = Callable[[Any, Any, Any, torch.device, Any, StepMode], Learning]
CompilePays = Callable[[Any, str, torch.device], bool]


def plan_actor_critic(
    p: Prepared,
    make_state: StateFactory,
    name: str,
    metrics: tuple[str, ...],
    compile_pays: CompilePays | None = None,
) -> Plan:
    """A run of an actor-critic learner on this engine (SAC, TD3): its device and
    mode, its step mode (`--compile auto` compiles where `compile_pays` says so), its
    state, and the threads its actor's and critics' parameters call for."""
    cfg = p.config
    device = resolve_device(cfg.device)
    mode = resolve_mode(cfg)
    pays = compile_pays is not None and compile_pays(cfg, mode, device)
    step_mode = resolve_step_mode(cfg.compile, device, pays)
    state = make_state(
        p.filled, p.observation_space, p.action_space, device, p.resume_state, step_mode
    )
    learner: Any = state.learner
    params = num_params(learner.actor) + num_params(learner.critic)
    return plan(p, state, name, mode, metrics, params)


def plan(
    p: Prepared,
    state: Learning,
    name: str,
    mode: str,
    metrics: tuple[str, ...],
    num_params: int,
) -> Plan:
    """A single-learner off-policy run (serial, sync, async, Ray) of algorithm
    `name` over `state`; `metrics`: its update's statistics; `num_params`: the
    learner's parameters (it gets threads when they are many)."""
    cfg, device = p.config, state.learner.device
    busy = 0 if mode == "serial" else (cfg.workers or physical_cores())
    conv = is_convolutional(state.acting_net)
    every_core = takes_every_core(mode, conv, state.settings.batch_size)
    threads = set_learner_threads(num_params, busy, cfg.learner_threads, every_core)
    hold = held(device.type, cfg.learner_threads)
    step_mode = state.learner.step_mode
    resolved = {
        "mode": mode,
        "device": str(device),
        "step_mode": step_mode,
        "learner_threads": threads,
        "replay": type(state.replay).__name__,
    }
    loops: list[OffPolicyLoop] = []

    def run(session: TrainSession) -> None:
        source = make_source(state, mode, session.console.message)
        governor = AdaptiveThreads(threads, session.console.message, hold=hold)
        loops.append(OffPolicyLoop(state, source, governor))
        run_loop(loops[0], session)

    def close() -> None:
        for loop in loops:
            loop.close()

    return Plan(
        banner=f"pararl: {name} on {cfg.env}, mode {mode}, learner on {device}"
        + (f" (step: {step_mode})" if step_mode != "eager" else ""),
        metrics=(*metrics, *METRICS),
        resolved=resolved,
        make_model=state.make_model,
        start=(state.env_steps, state.wall_s),
        run=run,
        steps=lambda: state.env_steps,
        checkpoint=lambda wall_s: state.state(True, wall_s),
        close=close,
        notes=start_notes(state, p.resume_state is not None),
    )


class BusyMeter:
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

    def report(self) -> dict[str, Any]:
        now = time.monotonic()
        span, self._since = now - self._since, now
        row = {
            # a chunk's acting counts in the interval it arrives in: over a short one,
            # more than the interval (a log line soon after another), so at most 1
            "actor_cpu": min(1.0, float(self.busy.sum() / max(span * len(self.busy), 1e-9))),
            "learner_cpu": self.learner_busy / max(span, 1e-9),
            "policy_lag": float(np.mean(self.lags)) if self.lags else None,
            "actor_version": self.acted_version if self.acted_version >= 0 else None,
        }
        self.busy[:], self.lags, self.learner_busy = 0.0, [], 0.0
        return {k: v for k, v in row.items() if v is not None}


__all__ = [
    "CHUNK_TRANSITIONS",
    "CHUNK_UPDATES",
    "METRICS",
    "PUBLISH_EVERY",
    "BusyMeter",
    "Learning",
    "OffPolicyLoop",
    "actor_spec",
    "chunk_for",
    "default_actors",
    "local_source",
    "make_source",
    "plan",
    "resolve_mode",
    "run_loop",
    "start_notes",
]
