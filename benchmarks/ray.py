"""`python -m benchmarks ray`: DQN sampling throughput of Ray actors against local
actor processes on a simulated cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.dqn import Pararl, RateRow, spells, workload_config
from benchmarks.lib import harness as h
from benchmarks.lib.figures import Panel, Series

TARGET = 0.8  # Ray's sampling throughput against the local backend's, at least
LABELS = {
    "local": "local actor processes (shared memory)",
    "ray": "Ray actors (object store)",
}


@dataclass(frozen=True)
class Config(h.Options):
    """DQN sampling throughput, Ray actors against local actor processes, on a simulated
    multi-node Ray cluster. --quick: 0.5 s spells, 1 round."""

    env: str = "CartPole-v1"  # Gymnasium env id the actors step (DQN defaults otherwise).
    workers: int = 2  # Actors of each backend (Ray actors, or local actor processes).
    envs_per_worker: int = 4  # Envs each actor steps.
    nodes: int = 2  # Simulated Ray nodes; each gets workers / nodes CPUs.
    repeats: int = 5  # Rounds; every measurement runs once per round.
    block_s: float = 3.0  # Length of each timed spell (s).
    warmup_s: float = 1.0  # Untimed lead-in of each spell (s).


def resolve(config: Config) -> Config:
    from pararl.samplers.ray.cluster import import_ray

    c = h.apply_quick(config, {"repeats": 1, "block_s": 0.5, "warmup_s": 0.2})
    h.require(c, ">= 1: workers envs_per_worker repeats", "> 0: block_s", ">= 0: warmup_s")
    h.check([(not 1 <= c.nodes <= c.workers, "--nodes must be in 1..--workers")])
    import_ray()  # a one-line error without Ray, before anything starts
    return c


@dataclass
class Results:
    nodes: int
    actor_nodes: int  # distinct nodes the Ray actors landed on
    rates: list[RateRow]  # local and Ray actors: env steps/s


@contextlib.contextmanager
def simulated_cluster(nodes: int, cpus_per_node: int) -> Iterator[int]:
    """A Ray cluster of `nodes` simulated nodes here, shut down after (a Ray instance
    already initialised in this process is used as it is, and left)."""
    from pararl.samplers.ray.cluster import import_ray

    ray = import_ray()
    if ray.is_initialized():
        yield len(ray.nodes())
        return
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus_per_node})
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus_per_node)
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        cluster.wait_for_nodes()
        yield nodes
    finally:
        ray.shutdown()
        cluster.shutdown()


def actor_nodes(driver: Pararl) -> int:
    """Distinct nodes of the driver's Ray DQN actors, as each actor reports its own."""
    from pararl.samplers.ray.cluster import import_ray

    actors = driver.loop.source.group.actors  # type: ignore[attr-defined]
    return len(set(import_ray().get([a.node.remote() for a in actors], timeout=60)))


def measure(c: Config, meta: h.Metadata) -> Results:
    from pararl.samplers.ray.cluster import import_ray

    meta.versions["ray"] = import_ray().__version__
    base = replace(workload_config("defaults", c.env), envs_per_worker=c.envs_per_worker)
    free = replace(base, replay_ratio=0.0)  # spells of acting alone
    rows = {name: RateRow(c.workers, name, label) for name, label in LABELS.items()}
    with simulated_cluster(c.nodes, max(1, c.workers // c.nodes)) as nodes:
        h.progress(f"ray: {nodes} Ray node(s) up; starting actors ...")
        local = Pararl(free, c.workers, report=h.progress)
        try:
            ray = Pararl(replace(free, backend="ray"), c.workers, report=h.progress)
            try:
                runs: dict[str, Any] = {"local": (local, "actors"), "ray": (ray, "actors")}
                spells(runs, rows, c.repeats, c.block_s, c.warmup_s)
                placed = actor_nodes(ray)
            finally:
                ray.close()
        finally:
            local.close()
    for row in rows.values():
        row.vs = h.ratio(row.steps, rows["local"].steps)
    return Results(nodes, placed, list(rows.values()))


def report(r: Results, meta: h.Metadata) -> h.Report:
    p, cores = meta.params, meta.affinity_cpus
    sampling: list[h.Col[RateRow]] = [
        h.Col("backend", lambda r: r.label, "l"),
        h.Col("actors", lambda r: r.actors),
        h.Col("envs/actor", lambda r: p["envs_per_worker"]),
        h.Col("steps/s median (min–max)", lambda r: h.fmt_spread(r.steps)),
        h.Col("vs local", lambda r: h.fmt_ratio(r.vs)),
    ]
    ray_over_local = next(row.vs for row in r.rates if row.system == "ray")
    verdict = "meets" if (ray_over_local or 0) >= TARGET else "misses"
    block = (
        "### Sampling throughput, Ray actors vs local actor processes\n\n"
        f"{p['workers']} actors of each backend, on a simulated Ray cluster of {r.nodes} nodes "
        f"on this {cores}-core machine (the Ray actors landed on {r.actor_nodes} distinct "
        "nodes). Env steps/s of acting epsilon-greedy with the Q-network and taking the chunks "
        f"into the replay memory, no learning; {p['repeats']} interleaved spells of "
        f"{p['block_s']} s.\n\n" + h.table(sampling, r.rates)
    )
    bars = Series.of(None, [(i, x.steps) for i, x in enumerate(r.rates) if x.steps], kind="bar")
    ticks = [(0, "local processes"), (1, "Ray actors")]
    title = f"Measured: {h.fmt_ratio(ray_over_local)} of local"
    ylabel = "env steps/s (acting + into the replay)"
    return h.Report(
        f"Ray backend: sampling throughput (`{h.PROG} ray`)",
        f"Ray actors sample at **{h.fmt_ratio(ray_over_local)}** the local backend's env "
        f"steps/s ({verdict} the {TARGET}× target)",
        [block],
        [Panel(title, [bars], ylabel=ylabel, xticks=ticks, legend=False)],
        "Ray vs local sampling",
    )
