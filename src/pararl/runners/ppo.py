"""PPO: one training loop fed by any rollout source.

    while not done:
        anneal the learning rate (and clip range)
        rollout <- the sampler (acting copy of the policy, GAE done)
        env_steps += its transitions
        minibatch epochs on the learning device
        normalisation statistics += the rollout's; weights -> the acting copy
        log, evaluate, checkpoint (session.tick)

Sources: envs in this process (`serial`) or in `ParallelVectorEnv` workers (`sync`)
through `samplers.rollout.collect`; actor processes that collect the next rollout
while this one updates, exactly `--policy-lag` rollouts behind (`async`,
`samplers.rollout.actors`); or Ray actors (`samplers.rollout.ray`); acting and
learning each on the device measured to be faster (`runners.ppo_state`; async
actors act on the CPU).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import torch

from pararl import seeding
from pararl.config import PPOConfig
from pararl.config.ppo import lag_unused
from pararl.devices import resolve_device
from pararl.envs.make import env_factory
from pararl.envs.masks import batch_mask
from pararl.errors import UsageError
from pararl.models import num_params
from pararl.mp.threads import (
    AdaptiveThreads,
    LentCores,
    every_core_threads,
    held,
    ppo_threads,
    torch_threads,
)
from pararl.mp.topology import physical_cores
from pararl.runners.ppo_mode import (
    LoopSides,
    ModeChoice,
    Threads,
    choose_mode,
    round_trip_s,
    time_sides,
)
from pararl.runners.ppo_state import PPOState, ThreadRule
from pararl.runners.session import TrainSession
from pararl.runners.setup import Plan, Prepared, encoder_note
from pararl.samplers.rollout.actors import (
    ActorPlan,
    RolloutActors,
    Taken,
    rollout_draws,
)
from pararl.samplers.rollout.collect import EnvStream, batch_of, collect
from pararl.vector import ParallelVectorEnv, SerialVectorEnv

RolloutSource = Callable[[], dict[str, Any]]  # the next rollout, flattened

# metrics.csv columns of a PPO run, beside the session's: the update's losses and
# how far it moved the policy (`algos.ppo`), the normalisation (`models.normalize`),
# the torch threads the update ran with (`AdaptiveThreads`; async: their mean over its
# minibatch steps, `LentCores`)
METRICS = (
    "pg_loss",
    "v_loss",
    "entropy",
    "approx_kl",
    "clipfrac",
    "obs_std",
    "reward_scale",
    "update_threads",
)

# an asynchronous run's, beside them: the rollouts between the weights that acted and
# the learner's, the actors' and the learner's busy fractions, V-trace's weights
ASYNC_METRICS = ("policy_lag", "actor_busy", "learner_busy", "vtrace_rho", "vtrace_clipped")


def train_loop(
    state: PPOState,
    session: TrainSession,
    next_rollout: RolloutSource,
    learned: Callable[[], dict[str, float]] | None = None,
    lent: LentCores | None = None,
) -> None:
    """See the module docstring. `learned`: called once the acting copy has the new
    weights (asynchronous actors are sent them there); its statistics join the row.
    `lent`: the actors' cores, lent to the update while they wait (async)."""
    cfg = state.config
    # the update's threads: on several, it drops to one while something else uses the
    # cores (two runs side by side), at rollout boundaries; a given count holds
    governor = AdaptiveThreads(
        state.update_threads,
        session.console.message,
        hold=held(state.devices.learn.type, cfg.learner_threads),
        name="PPO's update",
        set_threads=_leave,
    )
    while not session.done(state.env_steps):
        remaining = max(0.0, 1 - state.env_steps / cfg.budget)
        if cfg.anneal_lr:
            state.learner.set_lr_fraction(remaining)
        if cfg.anneal_clip:
            state.learner.set_clip_fraction(remaining)
        rollout = next_rollout()
        discounted = rollout.pop("discounted")
        learner, threads = state.learner, governor.threads
        updates, elapsed = learner.updates, learner.steps.stopwatch()
        lend = lent if lent is not None and threads == state.update_threads else None
        with torch_threads(threads), _counted_when_learned(session, len(rollout["advantages"])):
            if lend is not None:
                lend.start(threads)
            stats = learner.update(rollout, state.rng, between=lend)
        governor.record(learner.updates - updates, elapsed())
        stats["update_threads"] = threads if lend is None else lend.finish()
        state.learner.model.update_norm(rollout["obs"], discounted)  # after: see normalize
        # counted once learned from: a checkpoint of a cut update (Ctrl-C) holds the
        # steps before this rollout, whose steps a resume collects and learns again
        state.env_steps += len(rollout["advantages"])
        stats.update(state.learner.model.norm.stats())
        state.sync_actor()
        if learned is not None:
            stats.update(learned())
        session.tick(
            state.env_steps,
            state.learner.updates,
            state.actor,
            lambda: state.state(session.wall_s),
            stats,
        )


@contextlib.contextmanager
def _counted_when_learned(session: TrainSession, steps: int) -> Iterator[None]:
    """An update that Ctrl-C cuts says that its rollout's steps are not counted (a
    resume collects that many again; the minibatch steps taken stay in the weights),
    unless the run keeps nothing to resume (cut in its first update)."""
    try:
        yield
    except KeyboardInterrupt:
        if session.untrained:
            raise
        session.console.message(
            f"pararl: the update was cut short: its rollout's {steps:,} steps are not "
            "counted, and a resume collects them again"
        )
        raise


def _leave(threads: int) -> None:
    """The governor's count is applied around each update (`torch_threads`), so that
    acting keeps its own."""


def run_local(
    state: PPOState, session: TrainSession, mode: str, workers: int, num_envs: int
) -> None:
    """The loop over envs stepped here (`serial`) or by worker processes (`sync`)."""
    cfg = state.config
    fns = [env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)] * num_envs
    masks = state.mask_info  # action masks travel in shared memory (`envs.masks`)
    envs: SerialVectorEnv | ParallelVectorEnv = (
        SerialVectorEnv(fns, autoreset_mode="SameStep", shared_infos=masks)
        if mode == "serial"
        else ParallelVectorEnv(
            fns, num_workers=workers, autoreset_mode="SameStep", shared_infos=masks
        )
    )
    try:
        seeds = seeding.env_seeds(cfg.seed, num_envs, "env", 0, 0, state.env_steps)
        obs, infos = envs.reset(seed=seeds)
        stream = EnvStream.start(
            obs, state.rollout_spec.gamma, state.actor.initial_state(num_envs), batch_mask(infos)
        )
        draws = rollout_draws(cfg.seed, 0, 0, state.env_steps)  # as an async run's actor 0

        def next_rollout() -> dict[str, Any]:
            return collect(
                state.actor, state.rollout_spec, envs, stream, session.record_episodes, draws
            )

        train_loop(state, session, next_rollout)
    finally:
        envs.close()


def run_async(state: PPOState, session: TrainSession, layout: Layout) -> None:
    """The loop with actor processes (`samplers.rollout.actors`) collecting rollout j + 1
    while the learner updates on rollout j, their weights exactly `--policy-lag`
    rollouts behind."""
    cfg = state.config
    plan = ActorPlan(
        state.make_model,
        env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs),
        state.rollout_spec,
        state.mask_info,
        cfg.policy_lag,
        cfg.seed,
    )
    seeds = seeding.env_seeds(cfg.seed, layout.num_envs, "env", 0, 0, state.env_steps)
    actors = RolloutActors(plan, layout.workers, seeds, state.learner.model, state.env_steps)
    lagged(state, session, actors)


class LaggedRollouts(Protocol):
    """Rollouts acted exactly `--policy-lag` versions behind the learner: its local
    actor processes (`RolloutActors`), their serial twin, or Ray actors (`RayRollouts`)."""

    def take(self) -> Taken: ...

    def publish(self, model: torch.nn.Module, version: int) -> None: ...

    def idle(self) -> bool:
        """Whether every actor on this machine has delivered its next segment and waits
        for weights (their cores are free for the update, `LentCores`)."""
        ...

    def close(self) -> None: ...


def lagged(state: PPOState, session: TrainSession, rollouts: LaggedRollouts) -> None:
    """The asynchronous loop on `rollouts`: after learning n rollouts, version n goes
    to the actors; each row logs the lag, the busy fractions and V-trace's weights."""
    cfg, spec = state.config, state.rollout_spec
    clock = Clock()

    def next_rollout() -> dict[str, Any]:
        taken = rollouts.take()
        clock.taken(taken)
        for infos in taken.episodes:
            session.record_episodes(infos)
        batch = batch_of(taken.arrays, spec, raw=cfg.vtrace)
        clock.steps = len(batch["advantages"])
        if cfg.vtrace:
            clock.stats |= state.learner.vtrace(batch, spec.num_steps, state.settings.gamma)
        return batch

    def learned() -> dict[str, float]:
        stats = clock.learned()  # version `clock.rollouts`: learned from as many rollouts
        rollouts.publish(state.learner.model, clock.rollouts)
        return stats

    cores, given = every_core_threads(), cfg.learner_threads
    lent = None
    if cores > state.update_threads and not held(state.devices.learn.type, given):
        lent = LentCores(rollouts.idle, cores)
    try:
        train_loop(state, session, next_rollout, learned, lent)
    finally:
        if clock.rollouts:
            session.console.message(
                f"pararl: the actors' rollouts in flight (up to {cfg.policy_lag + 1}, of "
                f"{clock.steps:,} steps each) were not learned from"
            )
        rollouts.close()


class Clock:
    """An asynchronous loop's lag and busy fractions: the rollouts learned from, the
    weights version each was collected with, the actors' busy fraction, and the
    learner's (the update's share of the time between two rollouts taken)."""

    def __init__(self) -> None:
        self.rollouts, self.lag, self.actor_busy, self.steps = 0, 0, 0.0, 0
        self.stats: dict[str, float] = {}
        self._last: float | None = None
        self._took = time.perf_counter()

    def taken(self, taken: Taken) -> None:
        self.lag, self.actor_busy = self.rollouts - taken.version, taken.busy
        self._took = time.perf_counter()

    def learned(self) -> dict[str, float]:
        now = time.perf_counter()
        busy = (now - self._took) / (now - self._last) if self._last is not None else 1.0
        self.rollouts += 1
        self._last = now
        stats = self.stats | {
            "policy_lag": self.lag,
            "actor_busy": self.actor_busy,
            "learner_busy": min(1.0, busy),
        }
        self.stats = {}
        return stats


def run_ray(state: PPOState, session: TrainSession, num_actors: int, per_actor: int) -> None:
    """The loop with Ray actors collecting the rollouts, `per_actor` envs each: each
    rollout acted with the newest weights, or (`--mode async`) `--policy-lag` behind."""
    from pararl.samplers.rollout.ray import RayPPOPool, RayRollouts

    cfg = state.config
    pool = RayPPOPool(
        state.make_model,
        state.rollout_spec,
        dataclasses.replace(cfg, envs_per_worker=per_actor),
        num_actors,
        state.env_steps,
        session.console.message,
        state.mask_info,
    )
    if cfg.mode == "async":
        lagged(state, session, RayRollouts(pool, state.learner.model, cfg.policy_lag))
        return

    def gather() -> dict[str, Any]:
        learner = state.learner
        arrays, episodes = pool.gather(learner.model, learner.updates)
        for infos in episodes:
            session.record_episodes(infos)
        return batch_of(arrays, state.rollout_spec)

    try:
        train_loop(state, session, gather)
    finally:
        pool.close()


@dataclass(frozen=True)
class Layout:
    """Where a run's envs step: the mode (serial, sync or ray) and why, and the
    workers (Ray: actors) with the envs each steps."""

    choice: ModeChoice
    workers: int
    per_worker: int

    @property
    def mode(self) -> str:
        return self.choice.mode

    @property
    def num_envs(self) -> int:
        return self.workers * self.per_worker


# times an iteration's two sides: (env_fn, num_envs, env step s, actors, workers)
SidesTimer = Callable[[Callable[[], gym.Env], int, float, int, int], tuple[LoopSides, Threads]]


def choose(cfg: PPOConfig, continuous: bool = False, sides: SidesTimer | None = None) -> Layout:
    """The mode, the number of workers or Ray actors, and the envs each steps
    (`PPOConfig.split_envs`: the envs stay 8 by default whatever the machine, on as
    many of its cores as split them evenly). `continuous`: Box actions (a Gaussian
    policy), which `auto` keeps out of async (`lag_hurts`). `sides`: times an
    iteration's two sides (`ppo_mode.time_sides`) where `auto` would choose sync, to
    overlap them instead where that is the shorter (None: sync stays)."""
    if cfg.backend == "ray":
        from pararl.samplers.ray.cluster import ray_actors

        if cfg.mode == "serial":  # checked before Ray starts
            raise UsageError("--backend ray runs Ray actors; drop --mode serial")
        workers, per = cfg.split_envs(ray_actors(cfg.workers, cfg.ray_address, 0))
        ahead = f", {cfg.policy_lag} rollout(s) ahead" if cfg.mode == "async" else ""
        return Layout(ModeChoice("ray", None, f"{workers} Ray actors{ahead}"), workers, per)
    cores = physical_cores()
    if cfg.mode == "async":
        return _async_layout(cfg, cores, "asked for")
    workers, per = cfg.split_envs(cores)
    env_fn = env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)
    choice = choose_mode(cfg.mode, env_fn, workers * per, workers)
    if cfg.mode != "auto" or cores < 2 or cfg.act_device == "cuda":
        return Layout(choice, workers, per)
    kept = lag_hurts(cfg, continuous)
    if kept is not None:
        why = f"{choice.reason}; {kept} trains without async's policy lag"
        return Layout(ModeChoice(choice.mode, choice.env_step_s, why), workers, per)
    if choice.mode == "serial":
        # envs this cheap fit one core with the acting: an actor process takes them,
        # and the update overlaps them on another (MinAtar Breakout: 0.60x serial's
        # wall time, CartPole: 0.84x; BENCHMARKS.md)
        how = "one core steps and acts" if cfg.workers is None else "--workers given"
        return _async_layout(cfg, cores, f"{choice.reason}: {how}")
    if cfg.workers is not None or cfg.envs_per_worker is not None:  # shaped for workers
        given = "--workers" if cfg.workers is not None else "--envs-per-worker"
        why = f"{choice.reason}; {given} given: sync, not timed against async"
        return Layout(ModeChoice("sync", choice.env_step_s, why), workers, per)
    if sides is None or choice.env_step_s is None:
        return Layout(choice, workers, per)
    # workers pay; overlapping may pay more, where the update outweighs the acting
    # (Pong on 2 cores: 1.22-1.25x sync's agent steps/s; BENCHMARKS.md)
    actors, _ = cfg.split_envs(max(1, cores - 1))
    timed, threads = sides(env_fn, workers * per, choice.env_step_s, actors, workers)
    overlapped = timed.async_s(actors, cfg.policy_lag)
    lockstep = timed.sync_s(workers, round_trip_s())
    why = (
        f"{choice.reason}; {timed.describe(threads)}: an iteration ~{overlapped:.2f} s "
        f"async, ~{lockstep:.2f} s sync"
    )
    if overlapped < lockstep:
        return _async_layout(cfg, cores, why)
    return Layout(ModeChoice("sync", choice.env_step_s, why), workers, per)


def lag_hurts(cfg: PPOConfig, continuous: bool) -> str | None:
    """What `--mode auto` keeps out of async, where a rollout of policy lag cost more
    learning than the overlap saved time (None: nothing). Measured on 2 cores:
    - a recurrent policy: acting a rollout behind its learner, it lost a solved policy
      late in 12 of 30 runs of StatelessCartPole and PositionOnlyCartPoleEasy, serial
      or sync (bit for bit the same) in 3 of 30 (results/notes-2026-11-29.md);
    - a Gaussian policy (Box actions): Pendulum-v1, 100k steps, best evaluations -884
      and -865 async against -250 and -400 serial (seeds 0 and 1; async took 0.78x
      the wall time); HalfCheetah-v5, 200k steps, finals 508 and 692 against 959 and
      1261 (0.66x the wall time), 2026-11-30. The discrete-action runs measured kept
      their finals (CartPole, MinAtar, Taxi; BENCHMARKS.md)."""
    if cfg.recurrent != "none":
        return "a recurrent policy"
    if continuous:
        return "a Gaussian policy"
    return None


def sides_timer(p: Prepared) -> SidesTimer:
    """`choose`'s timer of an iteration's two sides for this run: a state of its
    settings (one epoch an update, eager, acting on the CPU as actors do), each loop's
    thread counts by the run's rules (`ppo_threads`, `LentCores`)."""
    cfg: PPOConfig = p.config
    one_epoch = dataclasses.replace(cfg, update_epochs=1, act_device="cpu", compile="off")
    filled = dataclasses.replace(p.filled, config=one_epoch)

    def make_state(num_envs: int) -> PPOState:
        return PPOState(
            filled, p.observation_space, p.action_space, num_envs, action_masks=p.action_masks
        )

    def threads(state: PPOState, actors: int, workers: int) -> Threads:
        size, given = num_params(state.learner.model), cfg.learner_threads
        own = ppo_threads(size, "async", actors, given)[1]
        wide = own if held(state.devices.learn.type, given) else max(own, every_core_threads())
        return Threads(own, wide, ppo_threads(size, "sync", workers, given)[1])

    def timer(env_fn: Callable[[], gym.Env], num_envs: int, step_s: float,
              actors: int, workers: int) -> tuple[LoopSides, Threads]:  # fmt: skip
        return time_sides(
            functools.partial(make_state, num_envs), env_fn, num_envs, step_s,
            functools.partial(threads, actors=actors, workers=workers),
            cfg.settings.update_epochs,
        )  # fmt: skip

    return timer


def _async_layout(cfg: PPOConfig, cores: int, why: str) -> Layout:
    """The learner keeps a core; actor processes step the envs and act on the others."""
    workers, per = cfg.split_envs(max(1, cores - 1))
    actors = f"{workers} actor process{'es' if workers > 1 else ''}"
    return Layout(ModeChoice("async", None, f"{why}; {actors} beside the learner"), workers, per)


def check_lag_options(cfg: PPOConfig, mode: str) -> None:
    """`--vtrace` and a `--policy-lag` other than its default act on async's policy
    lag alone: given where the run is not async (`mode`: the mode it runs in), one
    line, rather than an option silently unused."""
    if "async" in (mode, cfg.mode):
        return
    why = f"--mode auto chose {mode} here" if cfg.mode == "auto" else f"--mode {mode} has none"
    if cfg.vtrace:
        raise UsageError(f"--vtrace corrects for the policy lag of --mode async, and {why}; "
                         "add --mode async, or drop --vtrace")  # fmt: skip
    if cfg.policy_lag != PPOConfig.policy_lag:  # the default, which every mode takes
        raise lag_unused(cfg.policy_lag, why)


def check_minibatch(cfg: PPOConfig, num_envs: int, defaulted: Collection[str] = ()) -> None:
    """A minibatch must fit in a rollout. `defaulted`: the settings filled in from
    the env's kind (the line says when the size was not the user's)."""
    s = cfg.settings
    rollout = num_envs * s.num_steps
    if s.minibatch_size > rollout:
        raise UsageError(
            f"--minibatch-size {s.minibatch_size} is larger than a rollout "
            f"({rollout:,} = {num_envs} envs x {s.num_steps} steps); give at most "
            f"{rollout}, or more --num-envs or --num-steps"
        )
    count = max(1, rollout // s.minibatch_size)
    if cfg.recurrent != "none" and num_envs % count:
        fits = [rollout // c for c in range(1, num_envs + 1) if num_envs % c == 0]
        whose = ", the default for this env's actions" if "minibatch_size" in defaulted else ""
        raise UsageError(
            f"--recurrent: a minibatch is whole env sequences, and {count} minibatches "
            f"(--minibatch-size {s.minibatch_size}{whose}) do not split {num_envs} envs "
            f"evenly; give --minibatch-size one of {', '.join(map(str, fits))}"
        )


def thread_rule(cfg: PPOConfig, layout: Layout) -> ThreadRule:
    """The run's torch threads for a network of a given size (`ppo_threads`)."""
    return functools.partial(
        ppo_threads, mode=layout.mode, workers=layout.workers, given=cfg.learner_threads
    )


def banner(cfg: PPOConfig, layout: Layout, state: PPOState) -> str:
    """The start-up line: the mode and why, the envs, the devices and why, an uneven
    minibatch split, a step that is not run as written."""
    d, step_mode = state.devices, state.learner.step_mode
    return (
        f"pararl: PPO on {cfg.env}, mode {layout.mode} ({layout.choice.reason}), "
        f"{layout.num_envs} envs, act on {d.act}, learn on {d.learn} ({d.reason})"
        + _uneven_minibatches(state, layout.num_envs)
        + (f", {state.core.describe()}" if state.core is not None else "")
        + (f", step: {step_mode}" if step_mode != "eager" else "")
    )


def _uneven_minibatches(state: PPOState, num_envs: int) -> str:
    size, count = state.settings.minibatch_size, state.learner.hyper.num_minibatches
    rollout = num_envs * state.settings.num_steps
    if rollout % size == 0:
        return ""
    return (
        f", {count} minibatch{'es' if count > 1 else ''} of {rollout // count} (the rollout "
        f"of {rollout:,} is not a multiple of --minibatch-size {size})"
    )


def resolved(layout: Layout, state: PPOState) -> dict[str, Any]:
    """What the run resolved at start-up, for config.json."""
    return {
        "mode": layout.mode,
        "mode_reason": layout.choice.reason,
        "num_envs": layout.num_envs,
        "workers": layout.workers,
        "envs_per_worker": layout.per_worker,
        "devices": state.devices.as_dict(),
        "step_mode": state.learner.step_mode,
        "learner_threads": state.act_threads,
        "update_threads": state.update_threads,
    }


def plan(p: Prepared) -> Plan:
    """Lay the envs out, check the minibatch fits, build the state with its thread
    rule, and set acting's threads; the loop runs on that."""
    cfg: PPOConfig = p.config
    if cfg.agents > 1:  # N agents in one run: its own loop (imported here: it uses ours)
        from pararl.runners import ppo_population

        return ppo_population.plan(p)
    # timed where the learner is on the CPU; a GPU's would be chosen and timed twice
    # (`choose_devices`, in the timing's state and the run's), so auto stays sync there
    on_cpu = resolve_device(cfg.learn_device, "--learn-device").type == "cpu"
    timer = sides_timer(p) if on_cpu else None
    layout = choose(cfg, isinstance(p.action_space, gym.spaces.Box), timer)
    check_lag_options(cfg, layout.mode)
    check_minibatch(cfg, layout.num_envs, p.filled.defaults)
    filled = p.filled
    if layout.mode == "async" and cfg.act_device == "auto":  # actors act on the CPU
        filled = dataclasses.replace(filled, config=dataclasses.replace(cfg, act_device="cpu"))
    state = PPOState(
        filled,
        p.observation_space,
        p.action_space,
        layout.num_envs,
        p.resume_state,
        thread_rule(cfg, layout),
        p.action_masks,
    )
    torch.set_num_threads(state.act_threads)  # an update sets its own around it

    def run(session: TrainSession) -> None:
        if layout.mode == "ray":
            run_ray(state, session, layout.workers, layout.per_worker)
        elif layout.mode == "async":
            run_async(state, session, layout)
        else:
            run_local(state, session, layout.mode, layout.workers, layout.num_envs)

    return Plan(
        banner=banner(cfg, layout, state),
        metrics=METRICS + (ASYNC_METRICS if cfg.mode == "async" or layout.mode == "async" else ()),
        resolved=resolved(layout, state),
        make_model=state.make_model,
        start=(state.env_steps, state.wall_s),
        run=run,
        steps=lambda: state.env_steps,
        checkpoint=lambda wall_s: state.state(wall_s),
        notes=encoder_note(state.learner.model)
        + _fresh_states(p, state)
        + _lag_note(cfg, layout, state.env_steps),
    )


def _lag_note(cfg: PPOConfig, layout: Layout, env_steps: int) -> tuple[str, ...]:
    """A warning when the policy lag is as many rollouts as the budget has left: the
    actors would act with the first weights all along."""
    rollout = layout.num_envs * cfg.settings.num_steps
    left = max(0, cfg.budget - env_steps) // rollout
    if layout.mode != "async" or cfg.policy_lag <= 1 or cfg.policy_lag < left:
        return ()  # (the default lag of one is a rollout behind however short the run)
    return (
        f"pararl: warning: --policy-lag {cfg.policy_lag} is as many rollouts as the budget "
        f"has left ({left} of {rollout:,} steps): the actors act with weights that many "
        "rollouts old, the first ones all along; give a smaller lag or more --total-steps",
    )


def _fresh_states(p: Prepared, state: PPOState) -> tuple[str, ...]:
    """A resumed recurrent run's line: its envs start new episodes, so its states too."""
    if p.resume_state is None or state.core is None:
        return ()
    return (
        "pararl: resumed: every env starts a new episode, so the recurrent states start "
        "at zeros (the states of the episodes running at the checkpoint are not saved)",
    )


__all__ = ["METRICS", "lag_hurts", "plan", "train_loop"]
