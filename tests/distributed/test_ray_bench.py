"""`pararl bench ray`: the quick path end to end through the CLI (shrunk further) on
the shared two-node cluster, and the scaling model's arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pararl.bench.ray_model import ModelInputs, crossover_nodes, curves, learner_limit, throughput
from pararl.cli import main

INPUTS = ModelInputs(
    per_actor_steps_per_s=1_000.0,
    chunk_transitions=100,
    chunk_bytes=1_000,
    ingest_s_per_chunk=0.001,
    updates_per_s=5_000.0,
    replay_ratio=0.25,
    actors_per_node=4,
    bandwidth_bytes_per_s=1e6,
)


def test_model_learner_limit_and_crossover() -> None:
    # per env step: 0.25 / 5000 = 0.05 ms learning + (1 ms + 1 ms network) / 100 = 0.02 ms
    assert learner_limit(INPUTS) == pytest.approx(1 / 0.00007)
    assert learner_limit(INPUTS, 0.0) == pytest.approx(1 / 0.00002)
    assert throughput(INPUTS, 1) == pytest.approx(4_000)  # actors are the bottleneck
    assert throughput(INPUTS, 100) == pytest.approx(learner_limit(INPUTS))
    assert crossover_nodes(INPUTS) == pytest.approx(learner_limit(INPUTS) / 4_000)
    model = curves(INPUTS, 50)
    assert model["nodes"][-1] == 50
    assert model["with_ratio"] == sorted(model["with_ratio"])
    assert max(model["with_ratio"]) <= model["learner_limit"]


def test_quick_bench_on_two_nodes(two_nodes: str, tmp_path: Path) -> None:
    md = tmp_path / "BENCHMARKS.md"
    args = ["--block-s", "0.3", "--warmup-s", "0.1", "--transfer-repeats", "5"]
    code = main(
        ["bench", "ray", "--quick", "--out-dir", str(tmp_path), "--benchmarks-md", str(md), *args]
    )
    assert code == 0
    data = json.loads((tmp_path / "ray.json").read_text())
    assert data["actor_nodes"] == 2  # one Ray actor on each simulated node
    assert data["rates"]["ray"]["median"] > 0
    assert data["rates"]["local"]["median"] > 0
    assert data["rates"]["learner"]["median"] > 0
    assert data["ray_over_local"] == pytest.approx(
        data["rates"]["ray"]["median"] / data["rates"]["local"]["median"]
    )
    assert data["ingest"]["chunk_transitions"] == 512
    assert (tmp_path / "bench_ray.png").is_file()
    assert not md.exists()  # --quick leaves BENCHMARKS.md alone


def test_bench_options_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "ray", "--nodes", "3", "--workers", "2"]) == 2
    assert "--nodes must be in 1..--workers" in capsys.readouterr().err
