"""PPO for N seeds in one run (`--seeds N`): one loop, one vector env of every agent's
envs, one batched update.

    agents <- for each seed: the state its run alone builds (`PPOState`, from the
              global streams seeded with that seed), their networks stacked into
              one population (`models.population`)
    while not done:
        rollout <- every agent's envs (agent i's: the i-th block), acted by the
                   population in one forward pass, each agent drawing from its
                   own stream
        env_steps += steps per agent
        one batched update (`algos.population`): each agent its own minibatches
        each agent's normalisation statistics <- its share of the rollout
        log (a row per agent), evaluate (each agent on its own episodes), checkpoint

Each agent is the agent its seed's run would have been, to float tolerance: the same
env seeds, action draws, minibatch orders and initial weights, and the same steps
(tests/runners/test_ppo_population.py). A checkpoint holds each agent as a run of its
own would save it (`agents`), so `pararl.load(RUN, agent=i)` and `pararl evaluate RUN
--agent i` read agent i as they read any run.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from pararl import seeding
from pararl.algos.fused import StepMode
from pararl.algos.population import PopulationPPOLearner
from pararl.checkpoint import Header
from pararl.config import PPOConfig
from pararl.envs.make import env_factory
from pararl.envs.masks import batch_mask
from pararl.errors import UsageError
from pararl.models import num_params
from pararl.models.acting import PopulationDraws
from pararl.models.population import Population, population_of
from pararl.mp.threads import (
    AdaptiveThreads,
    every_core_threads,
    held,
    is_convolutional,
    ppo_threads,
    torch_threads,
)
from pararl.mp.topology import physical_cores
from pararl.runners.ppo import (
    ASYNC_METRICS,
    Clock,
    check_lag_options,
    check_minibatch,
    lag_hurts,
)
from pararl.runners.ppo import METRICS as PPO_METRICS
from pararl.runners.ppo_mode import ModeChoice, choose_mode, measure_step_s, round_trip_s
from pararl.runners.ppo_state import PPOState
from pararl.runners.session import TrainSession
from pararl.runners.setup import (
    Plan,
    Prepared,
    check_batch_workers,
    check_resumed_agents,
    envs_named_by_agent,
    refuse_unbatched,
)
from pararl.samplers.rollout.actors import ActorPlan, RolloutActors, rollout_draws
from pararl.samplers.rollout.collect import EnvStream, RolloutSpec, batch_of, collect
from pararl.vector import ParallelVectorEnv, SerialVectorEnv

METRICS = PPO_METRICS  # a run's alone, a row per agent


def check(cfg: PPOConfig) -> None:
    """What a population does not do yet, refused in one line before anything starts."""
    s = cfg.settings
    refusals = [
        (cfg.backend == "ray", "--backend ray"),
        (cfg.vtrace, "--vtrace"),
        (cfg.recurrent != "none", "--recurrent"),
        (
            s.model == "multi-input",
            "the multi-input encoder (Dict, Tuple and discrete observations)",
        ),
    ]
    refuse_unbatched(who(cfg), refusals)


def who(cfg: PPOConfig) -> str:
    """How a population's errors name it."""
    return f"{cfg.agents} agents (--seeds, --sweep)"


def layout(
    cfg: PPOConfig,
    total_envs: int,
    step_time: Callable[[Callable[[], gym.Env]], float] = measure_step_s,
    round_trip: Callable[[], float] = round_trip_s,
    continuous: bool = False,
) -> tuple[ModeChoice, int]:
    """The mode (serial, sync or async) and the workers, on as many of the cores as
    split every agent's envs together evenly (async: one actor process steps them
    all). `auto` on 2 cores or more: for an MLP on envs too cheap for workers, async,
    as a run of one of its agents alone chooses (`runners.ppo.choose`), so that agent
    i is the agent of seed i's run; otherwise sync: with `--workers` given, for what
    learns worse a rollout behind (`runners.ppo.lag_hurts`: `continuous`, Box
    actions), and for a CNN, whose batched update takes every core, which an actor
    process would fight for (a CNN run alone on cheap envs runs async: its agents are
    then those of seed i's sync run; a run alone on envs that pay for workers may
    go async where its iteration's sides, timed, say so: a batch there stays sync).
    `step_time` and `round_trip` measure the env and this machine (given, in tests)."""
    beside = "one actor process beside the learner"
    check_batch_workers(cfg.workers, cfg.mode)
    if cfg.mode == "async":
        return ModeChoice("async", None, f"asked for; {beside}"), 1
    if cfg.workers is not None:
        workers = cfg.workers
        if total_envs % workers:
            raise UsageError(
                f"{total_envs} envs ({cfg.agents} agents x {total_envs // cfg.agents}) do not "
                f"split evenly over --workers {workers}; give --workers that divides them"
            )
    else:
        cores = physical_cores()
        workers = max(w for w in range(1, min(total_envs, cores) + 1) if total_envs % w == 0)
    if cfg.mode != "auto":
        return ModeChoice(cfg.mode, None, "asked for"), workers
    if workers < 2:
        return ModeChoice("serial", None, "one core"), workers
    kept = lag_hurts(cfg, continuous)
    if kept is not None:
        return ModeChoice("sync", None, f"{kept} trains without async's policy lag"), workers
    if cfg.settings.model == "mlp" and cfg.act_device != "cuda" and cfg.workers is None:
        per_agent = total_envs // cfg.agents
        fn = env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)
        alone = choose_mode("auto", fn, per_agent, workers, round_trip, step_time)
        if alone.mode == "serial":
            # 8 CartPole agents, 30k steps each, 2 cores: 0.88x sync's wall time (the
            # update keeps one core busy, the actor steps all 64 envs on the other)
            return ModeChoice("async", None, f"{alone.reason}: {beside}"), 1
    # every agent's envs at once: their vector step outweighs the round trip to the
    # workers (CartPole, 8 agents x 8 envs on 2 cores: sync 0.68x serial's wall time)
    return ModeChoice("sync", None, f"{total_envs} envs of {cfg.agents} agents"), workers


BATCHED_UPDATES_TO_COMPILE = 25_000  # planned batched updates from which `auto` compiles


def population_step_mode(
    cfg: PPOConfig, per_agent: int, device: torch.device, convolutional: bool
) -> StepMode:
    """How the batched loss runs (`algos.population`): `--compile on` compiles it;
    `off` runs it as written; `auto` compiles an MLP population's on the CPU when the
    run plans `BATCHED_UPDATES_TO_COMPILE` batched updates or more. 8 CartPole agents'
    batched step (one thread): 1.38 ms compiled against 2.0 as written; a compile
    takes ~7 s here (~4 s from inductor's on-disk cache, up to ~30 s on a slower
    machine), so ~25k updates repay it where it is slowest (2026-11-30). A CNN
    population's step, arithmetic rather than calls, is not measured compiled."""
    if cfg.compile == "on":
        return "compile"
    if cfg.compile == "off" or device.type != "cpu" or convolutional:
        return "eager"
    s = cfg.settings
    rollout = per_agent * s.num_steps
    minibatches = max(1, rollout // s.minibatch_size)
    planned = cfg.budget // rollout * s.update_epochs * minibatches
    return "compile" if planned >= BATCHED_UPDATES_TO_COMPILE else "eager"


class PopulationState:
    """Every agent's `PPOState` (built as its run alone builds it: its seed's global
    streams, its own network), and the learner that trains their stacked weights."""

    def __init__(self, p: Prepared, per_agent: int, mode: str, workers: int) -> None:
        """`per_agent`: each agent's envs."""
        cfg: PPOConfig = p.config
        self.config, self.per_agent = cfg, per_agent
        # agent k: combination k // --seeds of --sweep, seed --seed + k % --seeds
        self.settings = [combo for combo in cfg.grid for _ in range(cfg.seeds)]
        self.seeds = tuple(cfg.seed + k % cfg.seeds for k in range(cfg.agents))
        resume = p.resume_state
        check_resumed_agents(who(cfg), resume, cfg.agents)
        self.members: list[PPOState] = []
        for seed, combo in zip(self.seeds, self.settings, strict=True):
            seeding.seed_everything(seed)  # as `compose` seeds a run of this seed
            own = dataclasses.replace(cfg, seed=seed, seeds=1, sweep=(), **combo)  # type: ignore[arg-type]
            filled = dataclasses.replace(p.filled, config=own)
            member = PPOState(
                filled, p.observation_space, p.action_space, per_agent, None, None, p.action_masks
            )
            self.members.append(member)
        first = self.members[0]
        size = num_params(first.learner.model) * cfg.agents  # the batched update's
        self.act_threads, threads = ppo_threads(size, mode, workers, cfg.learner_threads)
        # the workers wait for the update (serial, sync): it takes every core, as a
        # large network's does (8 CartPole agents, 50k steps each, 2 cores: the run
        # in 0.81x the wall time of one thread's); beside an actor (async), the
        # learner's count
        waited = mode != "async"
        self.update_threads = every_core_threads(cfg.learner_threads) if waited else threads
        self.population = Population([m.learner.model for m in self.members])
        learn = first.devices.learn
        conv = is_convolutional(first.learner.model)
        self.step_mode = population_step_mode(cfg, per_agent, learn, conv)
        self.learner = PopulationPPOLearner(
            self.population,
            [m.learner.hyper for m in self.members],
            [m.settings.lr for m in self.members],
            learn,
            self.step_mode,
        )
        self.env_steps, self.wall_s = 0, 0.0  # each agent's
        if resume is not None:
            for i, agent in enumerate(resume["agents"]):
                self.learner.load_agent_state(i, agent["learner"])
            header = Header.of(resume)
            self.env_steps, self.wall_s = header.env_steps, header.wall_s
        # each agent's minibatch stream, as its run's `PPOState.rng`
        self.rngs = [seeding.generator(s, "replay", 0, self.env_steps) for s in self.seeds]

    @property
    def n(self) -> int:
        return len(self.seeds)

    def state(self, wall_s: float) -> dict[str, Any]:
        """The checkpoint: each agent as its run alone would save it, under `agents`."""
        agents = []
        for i, member in enumerate(self.members):
            member.env_steps = self.env_steps
            agents.append({**member.state(wall_s), "learner": self.learner.agent_state(i)})
        return {
            **Header("ppo", 2, self.env_steps, wall_s).as_dict(),
            "seeds": list(self.seeds),
            "settings": self.settings,
            "agents": agents,
        }

    def env_seeds(self) -> list[int]:
        """Every agent's env seeds, agent after agent (each its run alone's, where
        it is now)."""
        each, steps = self.per_agent, self.env_steps
        return [x for s in self.seeds for x in seeding.env_seeds(s, each, "env", 0, 0, steps)]

    @property
    def rollout_spec(self) -> RolloutSpec:
        """The agents' rollout: their discounts per env where they sweep them."""
        spec = self.members[0].rollout_spec
        discounts: list[float | np.ndarray] = []
        for name in ("gamma", "gae_lambda"):
            values = [getattr(m.rollout_spec, name) for m in self.members]
            same = len(set(values)) == 1
            discounts.append(values[0] if same else np.repeat(values, self.per_agent))
        return dataclasses.replace(spec, gamma=discounts[0], gae_lambda=discounts[1])


class LocalRollouts:
    """Every agent's envs stepped here (`serial`) or by workers (`sync`), acted by the
    population between updates."""

    def __init__(self, state: PopulationState, session: TrainSession, mode: str, workers: int):
        cfg, self.state, self.session = state.config, state, session
        self.spec = state.rollout_spec
        fn = env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)
        fns = [fn] * (state.n * state.per_agent)
        masks = state.members[0].mask_info
        self.envs: SerialVectorEnv | ParallelVectorEnv = (
            SerialVectorEnv(fns, autoreset_mode="SameStep", shared_infos=masks)
            if mode == "serial"
            else ParallelVectorEnv(
                fns, num_workers=workers, autoreset_mode="SameStep", shared_infos=masks
            )
        )
        try:
            obs, infos = self.envs.reset(seed=state.env_seeds())
        except BaseException:
            self.envs.close()
            raise
        self.stream = EnvStream.start(obs, self.spec.gamma, None, batch_mask(infos))
        steps = state.env_steps
        self.draws = PopulationDraws([rollout_draws(s, 0, 0, steps) for s in state.seeds])

    def next(self) -> dict[str, Any]:
        return collect(
            self.state.population,  # type: ignore[arg-type]
            self.spec,
            self.envs,
            self.stream,
            self.session.record_episodes,
            self.draws,
        )

    def learned(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        self.envs.close()


class LaggedPopulationRollouts:
    """`--mode async`: one actor process steps every agent's envs and acts with the
    population's weights exactly `--policy-lag` updates behind, collecting the next
    rollout while this process updates (`samplers.rollout.actors`; with lag 0, the
    sync loop's rollouts). One actor: the population acts on every agent's envs at
    once, its agents' envs side by side."""

    def __init__(self, state: PopulationState, session: TrainSession) -> None:
        cfg, self.state, self.session = state.config, state, session
        self.spec = state.rollout_spec
        plan = ActorPlan(
            functools.partial(population_of, state.members[0].make_model, state.n),  # type: ignore[arg-type]
            env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs),
            self.spec,
            state.members[0].mask_info,
            cfg.policy_lag,
            cfg.seed,
            state.seeds,
        )
        self.actors = RolloutActors(
            plan,
            1,
            state.env_seeds(),
            state.population,  # type: ignore[arg-type]
            state.env_steps,
        )
        self.clock = Clock()

    def next(self) -> dict[str, Any]:
        taken = self.actors.take()
        self.clock.taken(taken)
        for infos in taken.episodes:
            self.session.record_episodes(infos)
        return batch_of(taken.arrays, self.spec)

    def learned(self) -> dict[str, float]:
        stats = self.clock.learned()  # version `clock.rollouts`: learned from as many
        self.actors.publish(self.state.population, self.clock.rollouts)  # type: ignore[arg-type]
        return stats

    def close(self) -> None:
        if self.clock.rollouts:
            ahead = self.state.config.policy_lag + 1
            self.session.console.message(
                f"pararl: the actor's rollouts in flight (up to {ahead}) were not learned from"
            )
        self.actors.close()


def run(state: PopulationState, session: TrainSession, mode: str, workers: int) -> None:
    """The loop over every agent's envs, stepped here (`serial`), by workers (`sync`)
    or by an actor process a policy lag behind (`async`); an env that fails is
    reported with its agent."""
    with envs_named_by_agent(state.per_agent, state.seeds):
        _loop(state, session, mode, workers)


def _loop(state: PopulationState, session: TrainSession, mode: str, workers: int) -> None:
    cfg, n, num_steps = state.config, state.n, state.rollout_spec.num_steps
    rollouts: LocalRollouts | LaggedPopulationRollouts = (
        LaggedPopulationRollouts(state, session)
        if mode == "async"
        else LocalRollouts(state, session, mode, workers)
    )
    # the update's threads drop to one while something else uses the cores (as a
    # run's alone, `runners.ppo.train_loop`): on a busy machine, 8 CartPole agents'
    # update on 2 threads ran ~10x slower than on one
    governor = AdaptiveThreads(
        state.update_threads,
        session.console.message,
        hold=held(state.members[0].devices.learn.type, cfg.learner_threads),
        name="the population's update",
        set_threads=lambda threads: None,  # applied around each update
    )
    try:
        learner = state.learner
        while not session.done(state.env_steps):
            remaining = max(0.0, 1 - state.env_steps / cfg.budget)
            if cfg.anneal_lr:
                learner.set_lr_fraction(remaining)
            if cfg.anneal_clip:
                learner.set_clip_fraction(remaining)
            rollout = rollouts.next()
            discounted = rollout.pop("discounted")
            threads, updates, elapsed = governor.threads, learner.updates, learner.steps.stopwatch()
            with torch_threads(threads):
                stats: dict[str, Any] = learner.update(rollout, num_steps, state.rngs)
            governor.record(learner.updates - updates, elapsed())
            stats["update_threads"] = np.full(n, threads)
            # after the update, as a run's alone (`models.normalize`): each agent's own
            state.population.update_norm(rollout["obs"], discounted, num_steps)
            state.env_steps += len(rollout["advantages"]) // n  # once learned from (`ppo`)
            for agent, member in enumerate(state.population.agents):
                for name, value in member.norm.stats().items():
                    stats.setdefault(name, np.zeros(n))[agent] = value
            for name, value in rollouts.learned().items():
                stats[name] = np.full(n, value)
            session.tick(
                state.env_steps,
                learner.updates,
                state.population,
                lambda: state.state(session.wall_s),
                stats,
            )
    finally:
        rollouts.close()


def plan(p: Prepared) -> Plan:
    """Check what a population refuses, lay its envs out, build every agent."""
    cfg: PPOConfig = p.config
    check(cfg)
    workers_of_one, per_worker = cfg.split_envs(1)  # one agent's envs, on no machine
    per_agent = workers_of_one * per_worker
    total = per_agent * cfg.agents
    check_minibatch(cfg, per_agent, p.filled.defaults)
    continuous = isinstance(p.action_space, gym.spaces.Box)
    choice, workers = layout(cfg, total, continuous=continuous)
    mode = choice.mode
    check_lag_options(cfg, mode)
    state = PopulationState(p, per_agent, mode, workers)
    torch.set_num_threads(state.act_threads)
    first = state.members[0]
    swept = f" x {len(cfg.grid)} settings (--sweep)" if cfg.sweep else ""
    where = f"{workers} worker{'s' if workers > 1 else ''}"
    if mode == "serial":
        where = "this process"
    elif mode == "async":
        where = f"one actor process, {cfg.policy_lag} update(s) behind"
    last = cfg.seed + cfg.seeds - 1
    seeds = f"seed {cfg.seed}" if cfg.seeds == 1 else f"seeds {cfg.seed}-{last}"
    banner = (
        f"pararl: PPO on {cfg.env}, {cfg.agents} agents ({seeds}{swept}) in one batched "
        f"update, mode {mode} ({choice.reason}), "
        f"{per_agent} envs each on {where}, "
        f"on {first.devices.learn}"
        + (f", step: {state.step_mode}" if state.step_mode != "eager" else "")
    )
    return Plan(
        banner=banner,
        metrics=METRICS + (ASYNC_METRICS[:3] if mode == "async" else ()),
        resolved={
            "mode": mode,
            "mode_reason": choice.reason,
            "num_envs": per_agent,
            "workers": workers,
            "seeds": list(state.seeds),
            "agents": [{"seed": s, **c} for s, c in zip(state.seeds, state.settings, strict=True)],
            "devices": first.devices.as_dict(),
            "update_threads": state.update_threads,
            "step_mode": state.step_mode,
        },
        make_model=functools.partial(population_of, first.make_model, len(state.seeds)),
        start=(state.env_steps, state.wall_s),
        run=lambda session: run(state, session, mode, workers),
        steps=lambda: state.env_steps,
        checkpoint=state.state,
        seeds=state.seeds,
        settings=tuple(
            " ".join(f"{name}={value:g}" for name, value in combo.items())
            for combo in state.settings
        )
        if cfg.sweep
        else (),
    )


__all__ = ["METRICS", "PopulationState", "check", "plan"]
