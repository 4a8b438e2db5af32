"""`python -m benchmarks ray`: the quick path end to end (shrunk further) on the shared
two-node cluster, and the scaling model's arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.__main__ import main
from benchmarks.ray import ModelInputs

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
    assert INPUTS.learner_limit() == pytest.approx(1 / 0.00007)
    assert INPUTS.learner_limit(0.0) == pytest.approx(1 / 0.00002)
    assert INPUTS.sampling(1) == pytest.approx(4_000)  # the actors are the bottleneck
    assert INPUTS.crossover() == "14.3 actors (at 4 nodes)"  # 14,286 / 4,000 = 3.6 nodes
    assert INPUTS.crossover(0.0) == "50 actors (at 13 nodes)"  # 50,000 / 4,000 = 12.5


def test_quick_bench_on_two_nodes(two_nodes: str, tmp_path: Path) -> None:
    md = tmp_path / "BENCHMARKS.md"
    args = ["--block-s", "0.3", "--warmup-s", "0.1", "--transfer-repeats", "5", "--max-nodes", "50"]
    assert (
        main(["ray", "--quick", "--out-dir", str(tmp_path), "--benchmarks-md", str(md), *args]) == 0
    )
    r = json.loads((tmp_path / "ray.json").read_text())["results"]
    assert r["actor_nodes"] == 2  # one Ray actor on each simulated node
    local, ray, learner = r["rates"]
    assert min(local["steps"]["median"], ray["steps"]["median"], learner["updates"]["median"]) > 0
    assert ray["vs"] == pytest.approx(ray["steps"]["median"] / local["steps"]["median"])
    assert r["model"]["chunk_transitions"] == 512
    assert [row["nodes"] for row in r["curve"]][-1] == 50
    assert [row["with_ratio"] for row in r["curve"]] == sorted(
        row["with_ratio"] for row in r["curve"]
    )
    assert (tmp_path / "bench_ray.png").is_file()
    assert not md.exists()  # --quick leaves BENCHMARKS.md alone


def test_bench_options_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ray", "--nodes", "3", "--workers", "2"]) == 2
    assert "--nodes must be in 1..--workers" in capsys.readouterr().err
