"""Parameter-averaging DQN (the multi-process DQN post's first design,
docs/design/sources.md): N replicas that meet to average.

Every replica is a whole serial DQN — the one off-policy learner loop (`runners.offpolicy`) over
its own in-process chunk source (a `SerialVectorEnv`), with its own replay memory,
Q-network, target network and Adam. Every `average_every`
of its gradient updates, all replicas meet in one `all_reduce` and continue from the
mean of their parameters (online and target nets, and by default Adam's moments).
Rank 0 also owns the run (`TrainSession`): after each average it logs, evaluates and
checkpoints the averaged net, then tells every rank whether to stop. So all ranks
stop at the same average, and none waits for a collective that never comes.

The replicas step in lock-step counts (the same number of envs each), so the
averaging points are fixed in each replica's own env steps: a replica never needs
to ask the others whether it is time. Each replica keeps the serial loop's
semantics in its own steps (replay ratio, epsilon schedule); the run's step count
and budget are all replicas' steps together.

Ranks come from `distributed.launch`: spawned here (rank 0 is this process), or
started by `torchrun` on one or many machines. `--workers 1` is the serial twin:
one replica, a group of one, the same loop.
"""

from __future__ import annotations

import functools
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

from pararl import seeding
from pararl.algos.dqn import DQNState, check_spaces
from pararl.config import DQNConfig, Filled, saved_config
from pararl.devices import resolve_device
from pararl.distributed.launch import (
    CollectiveError,
    LocalReplicas,
    Rendezvous,
    agree,
    backend_for,
    from_environment,
    join,
    leave,
    local_rendezvous,
    replica_device,
    share_object,
)
from pararl.envs.make import env_factory
from pararl.errors import UsageError
from pararl.models import num_params
from pararl.mp.threads import set_learner_threads
from pararl.mp.topology import physical_cores
from pararl.rundir import RunDir
from pararl.runners import offpolicy
from pararl.runners.dqn import METRICS
from pararl.runners.offpolicy import OffPolicyLoop, local_source
from pararl.runners.session import TrainSession
from pararl.runners.setup import Plan, Prepared, compose, refuse_unbatched
from pararl.vector import SerialVectorEnv
from pararl.weights.averaging import AveragedWeights, adam_moments, module_tensors


def uses_averaging(config: DQNConfig) -> bool:
    """`--mode averaging`, or `--resume` of a run that used it."""
    if config.mode == "averaging" or config.resume is None:
        return config.mode == "averaging"
    run = RunDir(Path(config.resume))
    return run.config.is_file() and getattr(saved_config(run.root), "mode", "") == "averaging"


def averaging_span(cfg: DQNConfig) -> int:
    """Vector steps of each replica between two averages (`average_every` updates at
    `replay_ratio` updates per env step, `envs_per_worker` env steps per vector step)."""
    ratio = cfg.settings.replay_ratio
    return max(1, round(cfg.average_every / (ratio * cfg.envs_per_worker)))


def check_averaging(cfg: DQNConfig, world_size: int, under_torchrun: bool) -> None:
    # a batch resumed with --mode averaging (a new one is refused with its options)
    refuse_unbatched(f"--seeds {cfg.seeds}", [(cfg.seeds > 1, "--mode averaging")])
    if cfg.replay_ratio == 0:
        raise UsageError(
            "--replay-ratio 0 (learn without a ratio) needs --mode async, not averaging"
        )
    if under_torchrun and cfg.workers is not None and cfg.workers != world_size:
        raise UsageError(
            f"--workers {cfg.workers}, but torchrun started {world_size} ranks; "
            "leave --workers out under torchrun"
        )


def averaged_weights(state: DQNState) -> AveragedWeights:
    """What the replicas average, in an order every rank shares: the online net, and
    with it the target net and (`--optimizer-sync average`) Adam's moments."""
    learner = state.learner

    def also() -> list[torch.Tensor]:
        tensors = module_tensors(learner.q_target)
        if state.config.optimizer_sync == "average":
            tensors += adam_moments(learner.optimizer)
        return tensors

    return AveragedWeights(also)


class Replica:
    """One replica: the DQN learner loop over its own envs. Rank 0 passes the
    session to `run`."""

    def __init__(self, state: DQNState, rank: int, world_size: int) -> None:
        cfg = state.config
        self.state, self.rank, self.world_size = state, rank, world_size
        self.span = averaging_span(cfg) * cfg.envs_per_worker  # own env steps per average
        envs = SerialVectorEnv(
            [env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)]
            * cfg.envs_per_worker,
            shared_infos=state.mask_info,
        )
        try:
            # the replica's streams: rank, and where it (re)started
            self.loop = OffPolicyLoop(state, local_source(state, envs, (rank, 0, state.env_steps)))
        except BaseException:
            envs.close()
            raise
        self.weights = averaged_weights(state)
        self.sync_s, self.syncs = 0.0, 0

    @property
    def global_steps(self) -> int:
        """Env steps of all replicas together (they step the same number of envs)."""
        return self.state.env_steps * self.world_size

    def run(self, session: TrainSession | None) -> None:
        """The loop until `span` more env steps are in and learnt from, average,
        repeat until rank 0 says stop."""
        state, loop = self.state, self.loop
        while True:
            next_average = (state.env_steps // self.span + 1) * self.span
            while state.env_steps < next_average or state.updates_due() > 0:
                loop.iterate()
            if session is not None:
                session.episode_returns.extend(loop.episode_returns)
            loop.episode_returns.clear()
            self.average()
            if session is not None:
                session.tick(
                    self.global_steps,
                    state.learner.updates,
                    state.learner.q,
                    lambda: self.checkpoint(session.wall_s),
                    functools.partial(self.log_stats, loop.log_stats),
                )
            done = session is not None and session.done(self.global_steps)
            if collective(agree, done, state.learner.device):
                return

    def average(self) -> None:
        start = time.monotonic()
        q, updates = self.state.learner.q, self.state.learner.updates
        collective(self.weights.publish, q, updates)  # every replica's q: the mean
        self.loop.source.publish(q, updates)
        self.sync_s += time.monotonic() - start
        self.syncs += 1

    def log_stats(self, loop_stats: Any) -> dict[str, Any]:
        """The loop's stats, and the mean time of an average since the last log line
        (waiting for the slowest replica included)."""
        stats = loop_stats()
        row = {**stats, "sync_ms": 1000 * self.sync_s / self.syncs} if self.syncs else stats
        self.sync_s, self.syncs = 0.0, 0
        return row

    def checkpoint(self, wall_s: float, with_replay: bool = False) -> dict[str, Any]:
        """Rank 0's state (after an average, every replica's net is this one)."""
        return {**self.state.state(with_replay, wall_s), "replicas": self.world_size}

    def close(self) -> None:
        self.loop.close()


def collective(fn: Any, *args: Any) -> Any:
    """Call a collective; its failure (a rank died, or the timeout passed) becomes a
    `CollectiveError`, which rank 0 traces back to the replica that caused it."""
    try:
        return fn(*args)
    except RuntimeError as exc:
        raise CollectiveError(f"{fn.__name__} failed: {str(exc).splitlines()[0]}") from exc


def start_payload(state: DQNState, spaces: tuple[Any, Any]) -> dict[str, Any]:
    """What rank 0 hands every replica at the start: one config and one net for all
    (also how a resumed run's weights and optimizer reach the other replicas)."""
    return {
        "filled": state.filled,
        "learner": state.learner.state_dict(),
        "env_steps": state.env_steps,
        "spaces": spaces,
        "action_masks": state.mask_size > 0,
    }


def build_replica(payload: dict[str, Any], rdv: Rendezvous, device: torch.device) -> Replica:
    filled: Filled[DQNConfig] = payload["filled"]
    seeding.seed_everything(filled.config.seed, rdv.rank)
    observation_space, action_space = payload["spaces"]
    state = DQNState(
        filled,
        observation_space,
        action_space,
        device,
        rank=rdv.rank,
        action_masks=payload["action_masks"],
    )
    state.learner.load_state_dict(payload["learner"])
    state.env_steps = int(payload["env_steps"])
    set_learner_threads(num_params(state.learner.q), rdv.local_world_size - 1)
    return Replica(state, rdv.rank, rdv.world_size)


def follow(rdv: Rendezvous, device_kind: str) -> None:
    """A replica of rank > 0: join, take rank 0's config and net, train until told."""
    device = replica_device(resolve_device(device_kind), rdv)
    try:
        collective(join, rdv, device)
        replica = build_replica(collective(share_object, None, device), rdv, device)
        try:
            replica.run(None)
        finally:
            replica.close()
    finally:
        leave()


def replica_main(conn: Connection, rdv: Rendezvous, device_kind: str) -> None:
    """Entry of a replica process spawned by rank 0 (runs under `ProcessGroup`)."""
    conn.send((True, "started"))
    follow(rdv, device_kind)


def plan(p: Prepared, rdv: Rendezvous | None) -> Plan:
    """Rank 0's run: spawn (or join) the other replicas, hand them the start state,
    and lead: the replica loop, with the session's bookkeeping."""
    cfg: DQNConfig = p.config
    world = rdv.world_size if rdv is not None else cfg.workers or physical_cores()
    check_averaging(cfg, world, under_torchrun=rdv is not None)
    ranks = [rdv] if rdv is not None else local_rendezvous(world)
    device = replica_device(resolve_device(cfg.device), ranks[0])
    state = DQNState(
        p.filled,
        p.observation_space,
        p.action_space,
        device,
        p.resume_state,
        action_masks=p.action_masks,
    )
    threads = set_learner_threads(num_params(state.learner.q), ranks[0].local_world_size - 1)
    local = (
        LocalReplicas(replica_main, ranks, (device.type,)) if rdv is None and world > 1 else None
    )
    replicas: list[Replica] = []

    def explained(exc: CollectiveError) -> BaseException:
        return exc if local is None else local.explain(exc)

    def close() -> None:
        for replica in replicas:
            replica.close()
        if local is not None:
            local.close()
        leave()

    try:
        collective(join, ranks[0], device)
        spaces = (p.observation_space, p.action_space)
        collective(share_object, start_payload(state, spaces), device)
        replicas.append(Replica(state, 0, world))
    except CollectiveError as exc:
        close()
        raise explained(exc) from exc
    except BaseException:
        close()
        raise

    def run(session: TrainSession) -> None:
        try:
            replicas[0].run(session)
        except CollectiveError as exc:
            raise explained(exc) from exc

    backend = backend_for(device, ranks[0])
    return Plan(
        # evaluations run in their own process when a core is free: rank 0
        # evaluating in line would hold every rank at the next average
        banner=f"pararl: DQN on {cfg.env}, mode averaging, {world} replicas on {device} "
        f"({backend})",
        metrics=(*METRICS, *offpolicy.METRICS),
        resolved={
            "mode": "averaging",
            "device": str(device),
            "learner_threads": threads,
            "replicas": world,
            "backend": backend,
            "average_every_steps": averaging_span(cfg),
        },
        make_model=state.make_model,
        start=(state.env_steps * world, state.wall_s),
        run=run,
        steps=lambda: replicas[0].global_steps,
        checkpoint=lambda wall_s: replicas[0].checkpoint(wall_s, True),
        close=close,
        notes=offpolicy.start_notes(state, p.resume_state is not None),
    )


def train_averaging(config: DQNConfig, **kwargs: Any) -> TrainSession | None:
    """Train with parameter averaging; returns rank 0's session (None on the other
    ranks of a torchrun group, which own no run)."""
    rdv = from_environment()
    if rdv is not None and rdv.rank != 0:
        config.validate()
        check_averaging(config, rdv.world_size, under_torchrun=True)
        follow(rdv, config.device)
        return None
    return compose(config, "dqn", check_spaces, lambda p: plan(p, rdv), **kwargs)
