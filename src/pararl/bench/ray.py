"""`pararl bench ray`: DQN sampling throughput of Ray actors against local actor
processes, and the rates that feed the scaling model (`ray_model`).

On a simulated Ray cluster of `nodes` nodes (`ray.cluster_utils.Cluster`, each a
set of Ray processes on this machine, with `workers / nodes` CPUs), in one run:

- sampling throughput: env steps/s of acting with the policy and taking the chunks
  into the replay memory, no learning (`PararlAsync` "actors" mode), with
  `workers` Ray actors (the Ray backend) and with `workers` local actor processes
  (the local backend), the same envs per actor; interleaved, `repeats` spells each;
- the learner's gradient updates/s alone (the local driver, "learner" mode);
- the ingest cost of one chunk: `ray.put` + `ray.get` of a chunk of transitions
  and its copy into the replay memory.

Writes `ray.json`, a PNG and (full mode) the bench:ray section of BENCHMARKS.md,
with the model of throughput against nodes up to `max_nodes`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pararl.bench import ray_report
from pararl.bench.common import command_line, interleaved, progress, run_metadata, summarize
from pararl.bench.dqn_pararl import PararlAsync, workload_config
from pararl.bench.publish import OutputOptions, apply_quick, check, outputs, publish
from pararl.bench.ray_model import ModelInputs, curves
from pararl.config import DQNConfig
from pararl.raybackend.cluster import import_ray
from pararl.raybackend.dqn_pool import RAY_CHUNK_TRANSITIONS
from pararl.replay import Transitions

PROG = "pararl bench ray"
SECTION = "ray"
BACKENDS: tuple[Literal["local", "ray"], ...] = ("local", "ray")


@dataclass(frozen=True)
class RayBenchConfig(OutputOptions):
    """DQN sampling throughput, Ray actors against local actor processes, on a
    simulated multi-node Ray cluster; and the scaling model built from the rates.

    Never run two benchmarks at once. --quick: short spells, one round, no claims.
    """

    quick: bool = False
    """Fast check of the harness: 0.5 s spells, 1 round; writes only into --out-dir."""

    env: str = "CartPole-v1"
    """Gymnasium env id the actors step (DQN defaults otherwise)."""

    workers: int = 2
    """Actors of each backend (Ray actors, or local actor processes)."""

    envs_per_worker: int = 4
    """Envs each actor steps."""

    nodes: int = 2
    """Simulated Ray nodes; each gets workers / nodes CPUs."""

    repeats: int = 5
    """Rounds; every measurement runs once per round."""

    block_s: float = 3.0
    """Length of each timed spell (s)."""

    warmup_s: float = 1.0
    """Untimed lead-in of each spell (s)."""

    transfer_repeats: int = 200
    """Chunks put into and read back from the object store for the ingest cost."""

    actors_per_node: int = 16
    """Model: actors per node (one per core of a 16-core node); an assumption."""

    bandwidth_gbit: float = 10.0
    """Model: network bandwidth into the head node, Gbit/s; an assumption."""

    max_nodes: int = 100
    """Model: the largest cluster modelled."""

    seed: int = 0
    """Seed of the actors' envs and networks."""


QUICK: dict[str, Any] = {"repeats": 1, "block_s": 0.5, "warmup_s": 0.2, "transfer_repeats": 20}


def resolve(config: RayBenchConfig) -> RayBenchConfig:
    if config.quick:
        config = apply_quick(config, QUICK)
    check(
        [
            (config.workers < 1, "--workers must be >= 1"),
            (config.envs_per_worker < 1, "--envs-per-worker must be >= 1"),
            (not 1 <= config.nodes <= config.workers, "--nodes must be in 1..--workers"),
            (config.repeats < 1, "--repeats must be >= 1"),
            (not config.block_s > 0, "--block-s must be > 0"),
            (config.warmup_s < 0, "--warmup-s must be >= 0"),
            (config.transfer_repeats < 1, "--transfer-repeats must be >= 1"),
            (config.actors_per_node < 1, "--actors-per-node must be >= 1"),
            (not config.bandwidth_gbit > 0, "--bandwidth-gbit must be > 0"),
            (config.max_nodes < 1, "--max-nodes must be >= 1"),
        ]
    )
    import_ray()  # a one-line error without Ray, before anything starts
    return config


@contextlib.contextmanager
def simulated_cluster(nodes: int, cpus_per_node: int) -> Iterator[dict[str, Any]]:
    """A Ray cluster of `nodes` simulated nodes on this machine, shut down after.
    A Ray instance already initialised in this process is used as it is (and left)."""
    ray = import_ray()
    if ray.is_initialized():
        yield {"nodes": len(ray.nodes()), "started": False}
        return
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus_per_node})
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus_per_node)
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        cluster.wait_for_nodes()
        yield {"nodes": nodes, "started": True}
    finally:
        ray.shutdown()
        cluster.shutdown()


def dqn_config(config: RayBenchConfig, backend: Literal["local", "ray"]) -> DQNConfig:
    base = workload_config("defaults", config.env, config.seed)
    return dataclasses.replace(
        base, workers=config.workers, envs_per_worker=config.envs_per_worker, backend=backend
    )


def _spell(driver: PararlAsync, mode: Any, config: RayBenchConfig, out: list[float]) -> float:
    spell = driver.run(mode, config.block_s, config.warmup_s)
    rate = spell.steps_per_s if mode == "actors" else spell.updates_per_s
    out.append(rate)
    return rate


def ingest_cost(driver: PararlAsync, repeats: int) -> dict[str, float]:
    """Seconds per chunk: `ray.put` + `ray.get` of a chunk of transitions (what the
    object store costs the learner per chunk, on one machine), and its copy into the
    replay memory; and the chunk's size."""
    ray = import_ray()
    state = driver.state
    chunk: Transitions = state.replay.sample(RAY_CHUNK_TRANSITIONS, state.rng)
    store, copy = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        got = ray.get(ray.put(chunk))
        store.append(time.perf_counter() - start)
        start = time.perf_counter()
        state.replay.add(got)
        copy.append(time.perf_counter() - start)
    nbytes = sum(getattr(chunk, f.name).nbytes for f in dataclasses.fields(chunk))
    return {
        "store_s": statistics.median(store),
        "replay_copy_s": statistics.median(copy),
        "chunk_transitions": len(chunk),
        "chunk_bytes": nbytes,
    }


def measure(config: RayBenchConfig) -> dict[str, Any]:
    from pararl.raybackend.dqn_pool import RayDQNPool

    rates: dict[str, list[float]] = {"local": [], "ray": [], "learner": []}
    cpus = max(1, config.workers // config.nodes)
    with simulated_cluster(config.nodes, cpus) as cluster:
        progress(f"{PROG}: {cluster['nodes']} Ray node(s) up; starting actors ...")
        drivers: dict[str, PararlAsync] = {}
        try:
            drivers["local"] = PararlAsync(dqn_config(config, "local"), config.workers)
            drivers["ray"] = PararlAsync(
                dqn_config(config, "ray"),
                config.workers,
                source=lambda state: RayDQNPool(state, progress),
            )
            tasks: dict[str, Callable[[], float]] = {
                name: functools.partial(_spell, drivers[name], "actors", config, rates[name])
                for name in BACKENDS
            }
            tasks["learner"] = functools.partial(
                _spell, drivers["local"], "learner", config, rates["learner"]
            )
            interleaved(tasks, config.repeats)
            ingest = ingest_cost(drivers["ray"], config.transfer_repeats)
            ray_nodes = len({*import_ray().get(_actor_nodes(drivers["ray"]))})
        finally:
            for driver in drivers.values():
                driver.close()
    summaries = {name: summarize(samples).as_dict() for name, samples in rates.items()}
    ratio = summaries["ray"]["median"] / summaries["local"]["median"]
    per_actor = summaries["ray"]["median"] / config.workers
    inputs = ModelInputs(
        per_actor_steps_per_s=per_actor,
        chunk_transitions=int(ingest["chunk_transitions"]),
        chunk_bytes=int(ingest["chunk_bytes"]),
        ingest_s_per_chunk=ingest["store_s"] + ingest["replay_copy_s"],
        updates_per_s=summaries["learner"]["median"],
        replay_ratio=dqn_config(config, "ray").replay_ratio,
        actors_per_node=config.actors_per_node,
        bandwidth_bytes_per_s=config.bandwidth_gbit * 1e9 / 8,
    )
    return {
        "nodes": cluster["nodes"],
        "actor_nodes": ray_nodes,
        "rates": summaries,
        "ray_over_local": ratio,
        "per_actor_steps_per_s": per_actor,
        "ingest": ingest,
        "model": curves(inputs, config.max_nodes),
    }


def _actor_nodes(driver: PararlAsync) -> list[Any]:
    pool: Any = driver.loop.pool
    return [actor.node.remote() for actor in pool.group.actors]


def run(config: RayBenchConfig) -> dict[str, Any]:
    """Measure, print the tables, write JSON, PNG and (full mode) BENCHMARKS.md."""
    import torch

    command = command_line(PROG, config)
    config = resolve(config)
    outs = outputs(SECTION, config)
    meta = run_metadata(dataclasses.asdict(config), command)
    start, threads = time.perf_counter(), torch.get_num_threads()
    try:
        data: dict[str, Any] = {"benchmark": SECTION, "metadata": meta, **measure(config)}
    finally:
        torch.set_num_threads(threads)  # the learner set it as training would; restore
    meta["wall_s"] = round(time.perf_counter() - start, 1)
    meta["versions"]["ray"] = import_ray().__version__
    data["key_ratios"] = ray_report.key_ratios(data)
    publish(
        PROG,
        SECTION,
        data,
        outs,
        ray_report.tables(data),
        ray_report.plot,
        ray_report.markdown_section,
    )
    progress(f"{PROG}: done in {meta['wall_s']} s")
    return data
