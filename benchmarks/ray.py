"""`python -m benchmarks ray`: DQN sampling throughput of Ray actors against local
actor processes on a simulated cluster, and a scaling model from the rates measured.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, replace

from benchmarks.lib import harness as h
from benchmarks.lib.dqn_spells import Pararl, RateRow, Runs, spells, workload_config
from benchmarks.lib.figures import Panel, Series

TARGET = 0.8  # Ray's sampling throughput against the local backend's, at least
NODE_COUNTS = (1, 2, 4, 8, 16, 32, 64, 100)
LABELS = {
    "local": "local actor processes (shared memory)",
    "ray": "Ray actors (object store)",
    "learner": "learner alone (gradient updates/s)",
}


@dataclass(frozen=True)
class Config(h.Options):
    """DQN sampling throughput, Ray actors against local actor processes, on a simulated
    multi-node Ray cluster; and the scaling model built from the rates. --quick: 0.5 s
    spells, 1 round."""

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


QUICK = {"repeats": 1, "block_s": 0.5, "warmup_s": 0.2, "transfer_repeats": 20}


def resolve(config: Config) -> Config:
    from pararl.samplers.ray.cluster import import_ray

    c = h.apply_quick(config, QUICK)
    h.require(c, ">= 1: workers envs_per_worker repeats transfer_repeats actors_per_node max_nodes")
    h.require(c, "> 0: block_s bandwidth_gbit", ">= 0: warmup_s")
    h.check([(not 1 <= c.nodes <= c.workers, "--nodes must be in 1..--workers")])
    import_ray()  # a one-line error without Ray, before anything starts
    return c


@dataclass(frozen=True)
class ModelInputs:
    """sampling(n) = n × actors per node × per-actor rate; learner time per env step =
    replay ratio ÷ updates/s + (object-store cost + replay copy + chunk bytes ÷
    bandwidth) ÷ transitions per chunk; throughput(n) = min(sampling(n), 1 ÷ that)."""

    per_actor_steps_per_s: float  # measured
    chunk_transitions: int
    chunk_bytes: int
    ingest_s_per_chunk: float  # object-store put + get and replay copy (measured)
    updates_per_s: float  # the learner alone (measured)
    replay_ratio: float  # updates per env step
    actors_per_node: int  # assumed
    bandwidth_bytes_per_s: float  # assumed

    def learner_limit(self, replay_ratio: float | None = None) -> float:
        """Env steps/s the learner can take in (and learn from, at `replay_ratio`)."""
        ratio = self.replay_ratio if replay_ratio is None else replay_ratio
        chunk_s = self.ingest_s_per_chunk + self.chunk_bytes / self.bandwidth_bytes_per_s
        return 1.0 / (chunk_s / self.chunk_transitions + ratio / self.updates_per_s)

    def sampling(self, nodes: float) -> float:
        return nodes * self.actors_per_node * self.per_actor_steps_per_s

    def crossover(self, replay_ratio: float | None = None) -> str:
        """In words: the actors, and nodes, at which sampling reaches the learner's limit."""
        n = self.learner_limit(replay_ratio) / self.sampling(1)
        where = "within the first node" if n <= 1 else f"at {math.ceil(n)} nodes"
        return f"{n * self.actors_per_node:.3g} actors ({where})"


@dataclass
class ModelRow:
    nodes: int
    sampling: float
    with_ratio: float
    ingest_only: float


@dataclass
class Results:
    nodes: int
    actor_nodes: int  # distinct nodes the Ray actors landed on
    rates: list[RateRow]  # local and Ray actors: env steps/s; the learner: updates/s
    store_s: float
    replay_copy_s: float
    model: ModelInputs
    curve: list[ModelRow]


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


def ingest(driver: Pararl, repeats: int) -> tuple[float, float, int, int]:
    """Median seconds of `ray.put` + `ray.get` of a chunk and of its copy into the
    replay; the chunk's transitions and bytes."""
    from pararl.samplers.chunks.ray import RayChunkPool
    from pararl.samplers.ray.cluster import import_ray

    ray, state = import_ray(), driver.state
    chunk = state.replay.sample(RayChunkPool.CHUNK_TRANSITIONS, state.replay_rng)
    store, copy = [], []
    for _ in range(repeats):
        seconds, got = h.timed(lambda: ray.get(ray.put(chunk)))
        store.append(seconds)
        copy.append(h.timed(functools.partial(state.replay.add, got))[0])
    fields = (getattr(chunk, f.name) for f in dataclasses.fields(chunk))
    nbytes = sum(value.nbytes for value in fields if value is not None)
    return statistics.median(store), statistics.median(copy), len(chunk), nbytes


def measure(c: Config, meta: h.Metadata) -> Results:
    from pararl.samplers.ray.cluster import import_ray

    meta.versions["ray"] = import_ray().__version__
    base = replace(workload_config("defaults", c.env, c.seed), envs_per_worker=c.envs_per_worker)
    free = replace(base, replay_ratio=0.0)  # spells of acting alone, or learning alone
    rows = {name: RateRow(c.workers, name, label) for name, label in LABELS.items()}
    with simulated_cluster(c.nodes, max(1, c.workers // c.nodes)) as nodes:
        h.progress(f"ray: {nodes} Ray node(s) up; starting actors ...")
        local = Pararl(free, c.workers, report=h.progress)
        try:
            ray = Pararl(replace(free, backend="ray"), c.workers, report=h.progress)
            try:
                runs: Runs = {"local": (local, "actors"), "ray": (ray, "actors")}
                runs["learner"] = (local, "learner")
                spells(runs, rows, c.repeats, c.block_s, c.warmup_s)
                store_s, copy_s, transitions, nbytes = ingest(ray, c.transfer_repeats)
                placed = actor_nodes(ray)
            finally:
                ray.close()
        finally:
            local.close()
    for row in rows.values():
        row.vs = h.ratio(row.steps, rows["local"].steps)
    ray_rate, updates = h.med(rows["ray"].steps) or 0.0, h.med(rows["learner"].updates) or 1.0
    measured = ray_rate / c.workers, transitions, nbytes, store_s + copy_s, updates
    ratio = base.for_env("discrete").config.settings.replay_ratio
    model = ModelInputs(*measured, ratio, c.actors_per_node, c.bandwidth_gbit * 1e9 / 8)
    curve = []
    for n in [n for n in NODE_COUNTS if n < c.max_nodes] + [c.max_nodes]:
        sampling = model.sampling(n)
        limits = min(sampling, model.learner_limit()), min(sampling, model.learner_limit(0.0))
        curve.append(ModelRow(n, sampling, *limits))
    return Results(nodes, placed, list(rows.values()), store_s, copy_s, model, curve)


CURVE: list[h.Col[ModelRow]] = [
    h.Col("nodes", lambda row: row.nodes),
    h.Col("actors could sample", lambda row: h.fmt_rate(row.sampling)),
    h.Col("throughput at the replay ratio", lambda row: h.fmt_rate(row.with_ratio)),
    h.Col("ingest only", lambda row: h.fmt_rate(row.ingest_only)),
]


def report(r: Results, meta: h.Metadata) -> h.Report:
    p, m, cores = meta.params, r.model, meta.affinity_cpus
    sampling: list[h.Col[RateRow]] = [
        h.Col("backend", lambda r: r.label, "l"),
        h.Col("actors", lambda r: "–" if r.system == "learner" else r.actors),
        h.Col("envs/actor", lambda r: "–" if r.system == "learner" else p["envs_per_worker"]),
        h.Col("steps/s median (min–max)", lambda r: h.fmt_spread(r.steps or r.updates)),
        h.Col("vs local", lambda r: h.fmt_ratio(r.vs)),
    ]
    ray_over_local = next(row.vs for row in r.rates if row.system == "ray")
    verdict = "meets" if (ray_over_local or 0) >= TARGET else "misses"
    inputs = [
        ("per-actor sampling rate (measured)", f"{h.fmt_rate(m.per_actor_steps_per_s)} steps/s"),
        ("chunk", f"{m.chunk_transitions} transitions, {m.chunk_bytes / 1e3:.1f} kB"),
        ("ray.put + ray.get of a chunk (measured)", f"{1e3 * r.store_s:.3f} ms"),
        ("copy of a chunk into the replay (measured)", f"{1e3 * r.replay_copy_s:.3f} ms"),
        ("learner updates/s (measured)", h.fmt_rate(m.updates_per_s)),
        ("replay ratio (DQN default)", f"{m.replay_ratio:g} updates per env step"),
        ("actors per node (assumed)", str(m.actors_per_node)),
        ("network bandwidth (assumed)", f"{8 * m.bandwidth_bytes_per_s / 1e9:g} Gbit/s"),
    ]
    two: list[h.Col[tuple[str, str]]] = [h.Col("model input", lambda t: t[0], "l")]
    two.append(h.Col("value", lambda t: t[1], "l"))
    blocks = [
        "### Sampling throughput, Ray actors vs local actor processes\n\n"
        f"{p['workers']} actors of each backend, on a simulated Ray cluster of {r.nodes} nodes "
        f"on this {cores}-core machine (the Ray actors landed on {r.actor_nodes} distinct "
        "nodes). Env steps/s of acting epsilon-greedy with the Q-network and taking the chunks "
        f"into the replay memory, no learning; {p['repeats']} interleaved spells of "
        f"{p['block_s']} s.\n\n" + h.table(sampling, r.rates),
        f"### Scaling on paper\n\nA model, not a measurement: every rate in it was measured on "
        f"this {cores}-core machine (the inputs below); actors per node and bandwidth are "
        "assumptions. The learner is one process, so its limit is flat in the number of "
        "nodes:\n\n- sampling(n) = n × actors per node × per-actor rate;\n- learner time per "
        "env step = replay ratio ÷ updates/s + (object-store cost + replay copy + chunk bytes "
        "÷ bandwidth) ÷ transitions per chunk;\n- throughput(n) = min(sampling(n), 1 ÷ learner "
        f"time per env step).\n\n{h.table(two, inputs)}\n\n{h.table(CURVE, r.curve)}",
        f"With DQN's replay ratio ({m.replay_ratio:g}) the learner's "
        f"{h.fmt_rate(m.updates_per_s)} updates/s cap the run at {h.fmt_rate(m.learner_limit())} "
        f"env steps/s: the bottleneck from {m.crossover()}. With learning out of the way "
        "(ingest only, replay ratio 0), the driver can take in "
        f"{h.fmt_rate(m.learner_limit(0.0))} env steps/s, reached at {m.crossover(0.0)}. Past "
        "that, more nodes need a faster learner (a GPU, larger batches) or several learners "
        "(parameter averaging, or sharded replay as in Ape-X); the model ignores contention at "
        "the head node's object store and the network latency, so real clusters will bend the "
        "curve earlier.",
    ]
    bars = Series.of(None, [(i, x.steps) for i, x in enumerate(r.rates[:2]) if x.steps], kind="bar")
    nodes = [row.nodes for row in r.curve]
    lines = [
        Series("actors could sample", nodes, [row.sampling for row in r.curve], fmt="k--"),
        Series("learner ingest only", nodes, [row.ingest_only for row in r.curve], fmt="-o"),
        Series("learner at replay ratio", nodes, [row.with_ratio for row in r.curve], fmt="-s"),
    ]
    ticks = [(0, "local processes"), (1, "Ray actors")]
    ylabel = "env steps/s (acting + into the replay)"
    title = f"Measured: {h.fmt_ratio(ray_over_local)} of local"
    measured = Panel(title, [bars], ylabel=ylabel, xticks=ticks, legend=False)
    model = Panel(
        f"Model (extrapolated from {cores}-core rates)",
        lines,
        xlabel="nodes",
        ylabel="env steps/s",
        logx=10,
        logy=True,
    )
    return h.Report(
        f"Ray backend: sampling throughput and scaling on paper (`{h.PROG} ray`)",
        f"Ray actors sample at **{h.fmt_ratio(ray_over_local)}** the local backend's env "
        f"steps/s ({verdict} the {TARGET}× target); the model puts the learner bottleneck at "
        f"{m.crossover()} with the replay ratio, {m.crossover(0.0)} ingest only",
        blocks,
        [measured, model],
        "Ray vs local sampling, and the scaling model",
    )
