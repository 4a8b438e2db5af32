"""The scaling model of `pararl bench ray`: DQN throughput against the number of
nodes, from rates measured on this machine.

    sampling(n) = n × actors_per_node × per-actor rate
    learner time per env step = replay_ratio / update rate           (learning)
                              + ingest cost per chunk / chunk size   (object store
                                get + network transfer + copy into the replay)
    throughput(n) = min(sampling(n), 1 / learner time per env step)

The learner is one process in the driver, so its limit does not grow with n; the
bottleneck moves from the actors to it at n* = limit / (actors_per_node × per-actor
rate). It is a model: actors are taken to scale linearly (no contention for the
head node, a network of `bandwidth` bytes/s per chunk with no latency beyond the
measured object-store cost), and every input except `actors_per_node` and
`bandwidth` is a rate measured on a 2-core machine.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ModelInputs:
    per_actor_steps_per_s: float  # env steps/s of one actor (measured)
    chunk_transitions: int  # transitions per chunk
    chunk_bytes: int  # size of one chunk's arrays
    ingest_s_per_chunk: float  # object-store put+get and replay copy of one chunk (measured)
    updates_per_s: float  # learner gradient updates/s, alone (measured)
    replay_ratio: float  # updates per env step
    actors_per_node: int  # assumed (one actor per core of a node)
    bandwidth_bytes_per_s: float  # assumed network bandwidth into the head node


def learner_limit(m: ModelInputs, replay_ratio: float | None = None) -> float:
    """Env steps/s the learner can take in (and learn from, at `replay_ratio`)."""
    ratio = m.replay_ratio if replay_ratio is None else replay_ratio
    per_chunk = m.ingest_s_per_chunk + m.chunk_bytes / m.bandwidth_bytes_per_s
    per_step = per_chunk / m.chunk_transitions
    if ratio > 0:
        per_step += ratio / m.updates_per_s
    return 1.0 / per_step


def throughput(m: ModelInputs, nodes: int, replay_ratio: float | None = None) -> float:
    sampling = nodes * m.actors_per_node * m.per_actor_steps_per_s
    return min(sampling, learner_limit(m, replay_ratio))


def crossover_nodes(m: ModelInputs, replay_ratio: float | None = None) -> float:
    """Nodes at which sampling reaches the learner's limit (may be below 1)."""
    return learner_limit(m, replay_ratio) / (m.actors_per_node * m.per_actor_steps_per_s)


NODE_COUNTS = (1, 2, 4, 8, 16, 32, 64, 100)


def curves(m: ModelInputs, max_nodes: int = 100) -> dict[str, Any]:
    """The model's numbers for the report: per node count, the sampling demand, and
    throughput with the replay ratio and with ingest only (replay ratio 0: actors
    free-running, the learner only stores)."""
    nodes = [n for n in NODE_COUNTS if n <= max_nodes]
    if max_nodes not in nodes:
        nodes.append(max_nodes)
    return {
        "inputs": asdict(m),
        "nodes": nodes,
        "sampling": [n * m.actors_per_node * m.per_actor_steps_per_s for n in nodes],
        "with_ratio": [throughput(m, n) for n in nodes],
        "ingest_only": [throughput(m, n, 0.0) for n in nodes],
        "learner_limit": learner_limit(m),
        "ingest_limit": learner_limit(m, 0.0),
        "crossover_nodes": crossover_nodes(m),
        "crossover_nodes_ingest_only": crossover_nodes(m, 0.0),
    }


def nodes_text(value: float, actors_per_node: int) -> str:
    """`n*` in words: the actors, and the nodes, at which sampling meets the limit."""
    actors = value * actors_per_node
    where = "within the first node" if value <= 1 else f"at {math.ceil(value)} nodes"
    return f"{actors:.3g} actors ({where})"
