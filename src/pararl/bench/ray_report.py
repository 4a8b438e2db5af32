"""Tables, key ratios, the plot and the BENCHMARKS.md section of `pararl bench ray`.

Every function takes the JSON-ready dict `bench.ray.measure` returns (plus the
metadata), so a report can be rebuilt from `ray.json` alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pararl.bench.common import fmt_rate, fmt_ratio, markdown_table
from pararl.bench.publish import new_figure, save_figure, section_header
from pararl.bench.ray_model import nodes_text

TARGET = 0.8  # Ray's sampling throughput against the local backend's, at least
LABELS = {
    "local": "local actor processes (shared memory)",
    "ray": "Ray actors (object store)",
    "learner": "learner alone (gradient updates/s)",
}


def _cell(rate: dict[str, Any]) -> str:
    return f"{fmt_rate(rate['median'])} ({fmt_rate(rate['min'])}–{fmt_rate(rate['max'])})"


def _crossover(model: dict[str, Any], kind: str = "") -> str:
    return nodes_text(model[f"crossover_nodes{kind}"], model["inputs"]["actors_per_node"])


def key_ratios(data: dict[str, Any]) -> str:
    ratio, model = data["ray_over_local"], data["model"]
    verdict = "meets" if ratio >= TARGET else "misses"
    return (
        f"Ray actors sample at **{fmt_ratio(ratio)}** the local backend's env steps/s "
        f"({verdict} the {TARGET}× target); the model puts the learner bottleneck at "
        f"{_crossover(model)} with the replay ratio, "
        f"{_crossover(model, '_ingest_only')} ingest only"
    )


def sampling_table(data: dict[str, Any]) -> str:
    params = data["metadata"]["params"]
    rates = data["rates"]
    rows = [
        [
            LABELS[name],
            params["workers"],
            params["envs_per_worker"],
            _cell(rates[name]),
            fmt_ratio(rates[name]["median"] / rates["local"]["median"]),
        ]
        for name in ("local", "ray")
    ]
    rows.append([LABELS["learner"], "–", "–", _cell(rates["learner"]), "–"])
    return markdown_table(
        ["backend", "actors", "envs/actor", "steps/s median (min–max)", "vs local"],
        rows,
        "lrrrr",
    )


def inputs_table(data: dict[str, Any]) -> str:
    m, ingest = data["model"]["inputs"], data["ingest"]
    rows = [
        ["per-actor sampling rate (measured)", f"{fmt_rate(m['per_actor_steps_per_s'])} steps/s"],
        [
            "chunk",
            f"{m['chunk_transitions']} transitions, {m['chunk_bytes'] / 1e3:.1f} kB",
        ],
        ["ray.put + ray.get of a chunk (measured)", f"{1e3 * ingest['store_s']:.3f} ms"],
        ["copy of a chunk into the replay (measured)", f"{1e3 * ingest['replay_copy_s']:.3f} ms"],
        ["learner updates/s (measured)", fmt_rate(m["updates_per_s"])],
        ["replay ratio (DQN default)", f"{m['replay_ratio']:g} updates per env step"],
        ["actors per node (assumed)", str(m["actors_per_node"])],
        ["network bandwidth (assumed)", f"{8 * m['bandwidth_bytes_per_s'] / 1e9:g} Gbit/s"],
    ]
    return markdown_table(["model input", "value"], rows)


def model_table(data: dict[str, Any]) -> str:
    model = data["model"]
    columns = [model[k] for k in ("nodes", "sampling", "with_ratio", "ingest_only")]
    rows = [[n, fmt_rate(s), fmt_rate(r), fmt_rate(i)] for n, s, r, i in zip(*columns, strict=True)]
    return markdown_table(
        ["nodes", "actors could sample", "throughput at the replay ratio", "ingest only"],
        rows,
        "rrrr",
    )


def tables(data: dict[str, Any]) -> list[str]:
    return [sampling_table(data), inputs_table(data), model_table(data)]


def plot(data: dict[str, Any], path: Path) -> Path | None:
    fig, (bars, curve) = new_figure(2)
    rates = data["rates"]
    names = ["local", "ray"]
    medians = [rates[n]["median"] for n in names]
    errors = [
        [rates[n]["median"] - rates[n]["min"] for n in names],
        [rates[n]["max"] - rates[n]["median"] for n in names],
    ]
    bars.bar(["local processes", "Ray actors"], medians, yerr=errors, capsize=6)
    bars.set_ylabel("env steps/s (acting + into the replay)")
    bars.set_title(f"Measured on 2 cores: {fmt_ratio(data['ray_over_local'])} of local")
    model = data["model"]
    curve.plot(model["nodes"], model["sampling"], "k--", label="actors could sample")
    curve.plot(model["nodes"], model["ingest_only"], "o-", label="learner ingest only")
    curve.plot(model["nodes"], model["with_ratio"], "s-", label="learner at replay ratio")
    curve.set_xscale("log")
    curve.set_yscale("log")
    curve.set_xlabel("nodes")
    curve.set_ylabel("env steps/s")
    curve.set_title("Model (extrapolated from 2-core rates)")
    curve.legend()
    return save_figure(fig, path)


def markdown_section(data: dict[str, Any], table_texts: Sequence[str], figure: str | None) -> str:
    meta, model = data["metadata"], data["model"]
    m = model["inputs"]
    header = section_header(
        "Ray backend: sampling throughput and scaling on paper (`pararl bench ray`)",
        meta,
        key_ratios(data),
    )
    sampling, inputs, curve = table_texts
    parts = [
        header,
        "",
        f"### Sampling throughput, Ray actors vs local actor processes\n\n"
        f"{meta['params']['workers']} actors of each backend, on a simulated Ray cluster of "
        f"{data['nodes']} nodes on this 2-core machine (the Ray actors landed on "
        f"{data['actor_nodes']} distinct nodes). Env steps/s of acting epsilon-greedy with "
        "the Q-network and taking the chunks into the replay memory, no learning; "
        f"{meta['params']['repeats']} interleaved spells of {meta['params']['block_s']} s.",
        "",
        sampling,
        "",
        "### Scaling on paper",
        "",
        "A model, not a measurement: every rate in it was measured on this 2-core machine "
        "(the inputs below); actors per node and bandwidth are assumptions. The learner is "
        "one process, so its limit is flat in the number of nodes:",
        "",
        "- sampling(n) = n × actors per node × per-actor rate;",
        "- learner time per env step = replay ratio ÷ updates/s + (object-store cost + "
        "replay copy + chunk bytes ÷ bandwidth) ÷ transitions per chunk;",
        "- throughput(n) = min(sampling(n), 1 ÷ learner time per env step).",
        "",
        inputs,
        "",
        curve,
        "",
        f"With DQN's replay ratio ({m['replay_ratio']:g}) the learner's "
        f"{fmt_rate(m['updates_per_s'])} updates/s cap the run at "
        f"{fmt_rate(model['learner_limit'])} env steps/s: the bottleneck from "
        f"{_crossover(model)}. With learning out of the way (ingest "
        f"only, replay ratio 0), the driver can take in {fmt_rate(model['ingest_limit'])} "
        f"env steps/s, reached at {_crossover(model, '_ingest_only')}. Past "
        "that, more nodes need a faster learner (a GPU, larger batches) or several "
        "learners (parameter averaging, or sharded replay as in Ape-X); the model ignores "
        "contention at the head node's object store and the network latency, so real "
        "clusters will bend the curve earlier.",
    ]
    if figure:
        parts += ["", f"![Ray vs local sampling, and the scaling model]({figure})"]
    return "\n".join(parts)
