"""DQN for N seeds in one run (`--seeds N`): one loop, one vector env of every agent's
envs, one batched update.

    agents <- for each seed: the state its run alone builds (`DQNState`, from the
              global streams seeded with that seed: its network, target network,
              replay memory, epsilon schedule), their networks and target networks
              stacked into populations (`models.population.QPopulation`)
    while not done:
        if an agent has updates due (its replay ratio, once its memory is ready):
            one batched update per round (`algos.population.PopulationDQNLearner`),
            each agent due its own minibatch from its own memory and stream
        else:
            one vector step of every agent's envs (`samplers.chunks.population`),
            acted by the population in one forward pass, each agent drawing its
            exploration from its own stream; each agent's transitions to its memory
            (async: the chunks that arrived from the one actor process that steps
            them, `samplers.chunks.population_actor`, acting with weights published
            every `PUBLISH_EVERY` rounds)
        log (a row per agent), evaluate (each agent on its own episodes), checkpoint

This is the single run's loop (`runners.offpolicy.OffPolicyLoop` over a local
source) agent by agent: before each vector step an agent has made every update its
ratio allows, as its run alone has. Memories become ready at different steps (an
n-step builder holds back an agent's last transitions until its episodes end or n
steps pass), so agents may be due different numbers of updates: a round updates those
due and leaves the others as they are (rows of the optimizer not stepped, update
counts their own). Each agent is the agent its seed's run would have been, to float
tolerance (tests/runners/test_dqn_population.py); in `async` acting and learning
overlap, so how far behind the acting weights are is timing's, as in a run alone
with actor processes. `auto` runs an MLP's batch async, a CNN's serial or sync
(`choose_population_mode`). A checkpoint holds each agent as a
run of its own would save it (`agents`), and the replay memories beside, one per
agent in `replay.pt` (`runners.checkpoints`), so `pararl.load(RUN, agent=i)`, `pararl
evaluate RUN --agent i` and `--resume` of the whole batch work.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any

import numpy as np
import torch

from pararl import seeding
from pararl.algos.dqn import DQNState, stored_dtype
from pararl.algos.population import PopulationDQNLearner
from pararl.checkpoint import Header
from pararl.config import DQNConfig
from pararl.devices import resolve_device
from pararl.envs.make import env_factory
from pararl.envs.masks import mask_size
from pararl.models import num_params
from pararl.models.population import QPopulation, q_population_of
from pararl.mp.threads import AdaptiveThreads, held, is_convolutional, set_learner_threads
from pararl.mp.topology import physical_cores
from pararl.observations import encoded, stored
from pararl.replay.make import slot_bytes
from pararl.replay.uniform import check_fits
from pararl.runners.dqn import frame_stack
from pararl.runners.offpolicy import (
    PUBLISH_EVERY,
    BusyMeter,
    actor_spec,
    chunk_for,
    default_actors,
    start_notes,
)
from pararl.runners.ppo_mode import ModeChoice, choose_mode
from pararl.runners.session import TrainSession
from pararl.runners.setup import (
    Plan,
    Prepared,
    check_resumed_agents,
    envs_named_by_agent,
    refuse_unbatched,
)
from pararl.samplers.chunks.population import PopulationSampler
from pararl.samplers.chunks.population_actor import PopulationActor
from pararl.vector import ParallelVectorEnv, SerialVectorEnv

METRICS = ("epsilon", "loss", "q_mean", "learner_threads")
ASYNC_METRICS = ("policy_lag", "actor_cpu", "learner_cpu", "actor_version")  # `BusyMeter`'s


def check(cfg: DQNConfig) -> None:
    """What a population does not do yet, refused in one line before anything starts."""
    s = cfg.settings
    refusals = [
        (cfg.backend == "ray", "--backend ray"),
        (cfg.mode == "averaging", "--mode averaging"),
        (cfg.prioritized, "--prioritized"),
        (cfg.acting_lag > 0, "--acting-lag"),
        (cfg.restart_actors, "--restart-actors"),
        (cfg.compile == "on", "--compile on"),
        (
            s.model == "multi-input",
            "the multi-input encoder (Dict, Tuple and discrete observations)",
        ),
        (s.replay_ratio == 0, "--replay-ratio 0 (learning without a ratio, in --mode async)"),
    ]
    refuse_unbatched(f"--seeds {cfg.seeds}", refusals)


def check_memory(p: Prepared, stack: int) -> None:
    """Every agent's replay memory, once full, must fit in the memory available now
    (one line, before any is made, saying what they need and what to lower)."""
    cfg: DQNConfig = p.config
    space = p.observation_space
    slot = slot_bytes(
        tuple(space.shape or ()),
        stored_dtype(space),
        stack,
        mask_size=mask_size(p.action_space) if p.action_masks else 0,
        leaves=stored(encoded(space)),
    )
    check_fits(cfg.settings.buffer_size, slot, agents=cfg.seeds)


class DQNPopulationState:
    """Every agent's `DQNState` (built as its run alone builds it: its seed's global
    streams, its own networks and memory), whose learner is its row of one
    `PopulationDQNLearner` (`AgentLearner`); the env steps, each agent's."""

    def __init__(self, p: Prepared, device: torch.device, stack: int) -> None:
        cfg: DQNConfig = p.config
        self.config, self.settings, self.device = cfg, cfg.settings, device
        self.seeds = tuple(cfg.seed + i for i in range(cfg.seeds))
        resume = p.resume_state
        check_resumed_agents(f"--seeds {cfg.seeds}", resume, cfg.seeds)
        check_memory(p, stack)
        self.members: list[DQNState] = []
        for seed in self.seeds:
            seeding.seed_everything(seed)  # as `compose` seeds a run of this seed
            own = dataclasses.replace(cfg, seed=seed, seeds=1, compile="off")
            member = DQNState(
                dataclasses.replace(p.filled, config=own),
                p.observation_space,
                p.action_space,
                device,
                frame_stack=stack,
                action_masks=p.action_masks,
            )
            self.members.append(member)
        self.online = QPopulation([m.learner.q for m in self.members])
        targets = QPopulation([m.learner.q_target for m in self.members])
        self.learner = PopulationDQNLearner(self.online, targets, cfg, device)
        for i, member in enumerate(self.members):
            # the agent's learner is now its row of the population's; its own goes
            member.learner = self.learner.agent(i)  # type: ignore[assignment]
        self.env_steps, self.wall_s = 0, 0.0  # each agent's
        if resume is not None:
            memories = resume.get("replay") or [None] * self.n
            for member, agent, memory in zip(self.members, resume["agents"], memories, strict=True):
                member.load({**agent, "replay": memory})
            header = Header.of(resume)
            self.env_steps, self.wall_s = header.env_steps, header.wall_s
        for member, seed in zip(self.members, self.seeds, strict=True):
            member.env_steps = self.env_steps
            # its minibatch stream, as its run's (`DQNState.replay_rng`)
            member.replay_rng = seeding.generator(seed, "replay", 0, self.env_steps)
        # each agent's epsilon, as its run's one local actor explores (`actor_spec`)
        self.schedules = [m.acting_policy(0, 1, False).schedule for m in self.members]
        self.loss: torch.Tensor | None = None  # each agent's last update's loss, mean Q
        self.q_mean: torch.Tensor | None = None

    @property
    def n(self) -> int:
        return len(self.seeds)

    @property
    def updates(self) -> int:
        """The updates of the agent that made the most (the metrics' `updates`)."""
        return int(self.learner.updates.max())

    def advance(self, env_steps: int) -> None:
        """Every agent took `env_steps` more env steps."""
        self.env_steps += env_steps
        for member in self.members:
            member.env_steps = self.env_steps

    def updates_due(self) -> np.ndarray:
        """The updates each agent's replay ratio allows now ([N])."""
        return np.array([m.updates_due() for m in self.members])

    def update(self, due: np.ndarray) -> None:
        """One batched update of the agents `due` ([N] bools), each on a minibatch of
        its own memory, drawn with its own stream."""
        size = self.settings.batch_size
        batches = [
            m.replay.sample(size, m.replay_rng) if row else None
            for m, row in zip(self.members, due, strict=True)
        ]
        stats = self.learner.update(batches)
        loss, q_mean = stats["loss"], stats["q_mean"]
        if self.loss is not None and self.q_mean is not None and not due.all():
            rows = torch.as_tensor(due, device=loss.device)
            loss = torch.where(rows, loss, self.loss)
            q_mean = torch.where(rows, q_mean, self.q_mean)
        self.loss, self.q_mean = loss, q_mean

    def epsilons(self) -> list[float]:
        return [schedule(self.env_steps) for schedule in self.schedules]

    def log_stats(self, threads: int) -> dict[str, Any]:
        """Each agent's numbers ([N]): its epsilon, and once every agent has updated,
        its last update's loss and mean Q."""
        stats: dict[str, Any] = {
            "epsilon": np.array([m.acting_stats()["epsilon"] for m in self.members]),
            "learner_threads": threads,
        }
        if self.loss is not None and self.q_mean is not None and self.learner.updates.all():
            stats["loss"] = self.loss.cpu().numpy()
            stats["q_mean"] = self.q_mean.cpu().numpy()
        return stats

    def state(self, with_replay: bool, wall_s: float) -> dict[str, Any]:
        """The checkpoint: each agent as its run alone would save it, under `agents`;
        their replay memories (or None), one per agent, under `replay`."""
        agents = [m.state(False, wall_s) for m in self.members]
        memories = [m.replay.state_dict() for m in self.members] if with_replay else None
        return {
            **Header("dqn", 1, self.env_steps, wall_s).as_dict(),
            "seeds": list(self.seeds),
            "agents": agents,
            "replay": memories,
        }


def envs_per_agent(cfg: DQNConfig, mode: str) -> int:
    """Each agent's envs: as many as its run alone steps in `mode` (serial and sync:
    a worker's envs on every core; async: an actor's on every core but the learner's)."""
    actors = default_actors(cfg) if mode == "async" else cfg.workers or physical_cores()
    return actors * cfg.envs_per_worker


def run(state: DQNPopulationState, session: TrainSession, mode: str, workers: int) -> None:
    """The loop over every agent's envs, stepped here (`serial`), by workers (`sync`),
    or by an actor process while this one learns (`async`); an env that fails is
    reported with its agent."""
    per_agent = envs_per_agent(state.config, mode)
    # the update's threads drop to one while something else uses the cores (the
    # workers or the actor stepping every agent's envs), as a PPO population's do
    governor = AdaptiveThreads(
        torch.get_num_threads(),
        session.console.message,
        hold=held(state.device.type, state.config.learner_threads),
        name="the population's update",
    )
    with envs_named_by_agent(per_agent, state.seeds):
        if mode == "async":
            run_async(state, session, per_agent, governor)
        else:
            run_local(state, session, mode, workers, per_agent, governor)


def run_local(
    state: DQNPopulationState,
    session: TrainSession,
    mode: str,
    workers: int,
    per_agent: int,
    governor: AdaptiveThreads,
) -> None:
    """Serial and sync: acting and learning take turns, as the single run's loop
    does over a local source (see the module doc)."""
    cfg, first = state.config, state.members[0]
    fn = env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)
    fns, masks = [fn] * (state.n * per_agent), first.mask_info
    envs: SerialVectorEnv | ParallelVectorEnv = (
        SerialVectorEnv(fns, shared_infos=masks)
        if mode == "serial"
        else ParallelVectorEnv(fns, num_workers=workers, shared_infos=masks)
    )
    try:
        spec = actor_spec(first, per_agent, chunk_steps=1)
        path = (0, 0, state.env_steps)  # as a run's one local actor names its streams
        sampler = PopulationSampler(spec, envs, state.online, state.seeds, path)
        while not session.done(state.env_steps):
            due = state.updates_due()
            if due.any():
                start = time.perf_counter()
                for turn in range(int(due.max())):
                    state.update(due > turn)
                governor.record(int(due.max()), time.perf_counter() - start)
            else:
                sampler.step(state.epsilons(), session.record_episodes)
                for member, payload in zip(state.members, sampler.take(), strict=True):
                    member.replay.add(payload)
                state.advance(per_agent)
            session.tick(
                state.env_steps,
                state.updates,
                state.online,
                lambda: state.state(False, session.wall_s),
                lambda: state.log_stats(governor.threads),
            )
    finally:
        envs.close()


def run_async(
    state: DQNPopulationState, session: TrainSession, per_agent: int, governor: AdaptiveThreads
) -> None:
    """Async: one actor process acts for every agent (`samplers.chunks.population_actor`)
    while this one learns, as a single run's learner loop does over actor processes
    (`runners.offpolicy.OffPolicyLoop`): it takes chunks only once no agent has an
    update due (the actor waits on its full outbox meanwhile: back-pressure), makes
    up to `PUBLISH_EVERY` rounds of updates at a time, then publishes the stacked
    weights."""
    first = state.members[0]
    steps = max(1, chunk_for(state.settings.replay_ratio) // per_agent)
    spec = actor_spec(first, per_agent, chunk_steps=steps)
    make_net = functools.partial(q_population_of, first.make_model, state.n)
    actor = PopulationActor(
        spec, make_net, state.schedules, state.online.twin, state.updates, state.seeds,
        state.env_steps,
    )  # fmt: skip
    meter = BusyMeter(1)

    def stats() -> dict[str, Any]:
        acting = {k: np.full(state.n, v) for k, v in meter.report().items()}
        return {**state.log_stats(governor.threads), **acting}

    try:
        while not session.done(state.env_steps):
            due = state.updates_due()
            if due.any():
                start, rounds = time.perf_counter(), min(int(due.max()), PUBLISH_EVERY)
                for turn in range(rounds):
                    state.update(due > turn)
                governor.record(rounds, time.perf_counter() - start)
                actor.publish(state.online.twin, state.updates)
                meter.learner_busy += time.perf_counter() - start
            else:
                for payloads, message in actor.chunks(wait=0.5):
                    for member, payload in zip(state.members, payloads, strict=True):
                        member.replay.add(payload)  # copies the rows before the ack
                    state.advance(message.chunk.env_steps)
                    for infos in message.episodes:
                        session.record_episodes(infos)
                    meter.chunk(0, message.chunk, actor.version)
                actor.set_env_steps(state.env_steps)
            session.tick(
                state.env_steps,
                state.updates,
                state.online,
                lambda: state.state(False, session.wall_s),
                stats,
            )
    finally:
        actor.close()


def choose_population_mode(cfg: DQNConfig, convolutional: bool, workers: int) -> ModeChoice:
    """The mode asked for; `auto`, on more than one core: `async` for an MLP (its
    update keeps one core, the actor's acting the other: 8 CartPole agents ran
    1.3x faster than serial or sync on 2 cores), else the cheaper of serial and sync
    (a convolutional update takes every core, which an actor would fight: 4 MinAtar
    agents ran 1.2x slower async than serial)."""
    if cfg.mode == "auto" and physical_cores() > 1 and not convolutional:
        return ModeChoice("async", None, "an MLP's update on one core, acting on the other")
    fn = env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)
    return choose_mode(cfg.mode, fn, envs_per_agent(cfg, "sync") * cfg.seeds, workers)


def plan(p: Prepared) -> Plan:
    """Check what a population refuses, choose its mode, build every agent."""
    cfg: DQNConfig = p.config
    check(cfg)
    device = resolve_device(cfg.device)
    workers = cfg.workers or physical_cores()
    stack = frame_stack(cfg, p.observation_space)
    state = DQNPopulationState(p, device, stack)
    first = state.members[0]
    conv = is_convolutional(first.learner.q)
    choice = choose_population_mode(cfg, conv, workers)
    mode = choice.mode
    per_agent = envs_per_agent(cfg, mode)  # as a run of one agent steps in this mode
    size = num_params(first.learner.q) * state.n  # the batched update's
    busy = {"serial": 0, "sync": workers, "async": 1}[mode]  # processes stepping envs
    # a batch of convolutional networks' update takes every core in every mode: on
    # 2 cores, 4 MinAtar agents' update ran 1.4x faster on 2 threads than on 1
    # (serial and sync) and 1.3x beside the actor (async); an MLP's keeps one (8
    # CartPole agents: 2 threads no faster serial, 1.4x slower beside the actor)
    threads = set_learner_threads(size, busy, cfg.learner_threads, every_core=conv)
    banner = (
        f"pararl: DQN on {cfg.env}, {state.n} agents (seeds {state.seeds[0]}-"
        f"{state.seeds[-1]}) in one batched update, mode {mode} ({choice.reason}), "
        f"{per_agent} envs each"
        + (f" on {workers} worker{'s' if workers > 1 else ''}" if mode == "sync" else "")
        + (" on one actor process" if mode == "async" else "")
        + f", learner on {device}"
    )
    notes = start_notes(first, resumed=False)
    if p.resume_state is not None:
        held = [len(m.replay) for m in state.members]
        notes += (
            (f"pararl: replay memories restored ({min(held):,} to {max(held):,} transitions)",)
            if any(held)
            else (
                "pararl: this checkpoint has no replay memories (only final and "
                f"interrupted save them): the agents refill {cfg.settings.learning_starts:,} "
                "transitions each before they learn again",
            )
        )
    return Plan(
        banner=banner,
        metrics=METRICS + (ASYNC_METRICS if mode == "async" else ()),
        resolved={
            "mode": mode,
            "mode_reason": choice.reason,
            "num_envs": per_agent,
            "workers": 1 if mode == "async" else workers,  # async: the one actor
            "seeds": list(state.seeds),
            "agents": [{"seed": seed} for seed in state.seeds],  # as a PPO batch lists them
            "device": str(device),
            "learner_threads": threads,
            "replay": type(first.replay).__name__,
        },
        make_model=functools.partial(q_population_of, first.make_model, len(state.seeds)),
        start=(state.env_steps, state.wall_s),
        run=lambda session: run(state, session, mode, workers),
        steps=lambda: state.env_steps,
        checkpoint=lambda wall_s: state.state(True, wall_s),
        notes=notes,
        seeds=state.seeds,
    )


__all__ = [
    "ASYNC_METRICS",
    "METRICS",
    "DQNPopulationState",
    "check",
    "choose_population_mode",
    "envs_per_agent",
    "plan",
]
