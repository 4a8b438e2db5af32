"""`python -m benchmarks ray`: the quick path end to end (shrunk further: one actor of
each backend, each a process that imports torch) on the shared two-node cluster. That
pararl's Ray actors spread over the nodes is checked in tests/samplers/ray/
test_chunks.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.__main__ import main


def test_quick_bench_on_two_nodes(two_nodes: str, tmp_path: Path) -> None:
    md = tmp_path / "BENCHMARKS.md"
    args = ["--block-s", "0.3", "--warmup-s", "0.1", "--workers", "1", "--nodes", "1"]
    assert (
        main(["ray", "--quick", "--out-dir", str(tmp_path), "--benchmarks-md", str(md), *args]) == 0
    )
    r = json.loads((tmp_path / "ray.json").read_text())["results"]
    assert r["nodes"] == 2  # the cluster it found, not one of its own
    assert r["actor_nodes"] == 1  # the node its one Ray actor reported
    local, ray = r["rates"]
    assert min(local["steps"]["median"], ray["steps"]["median"]) > 0
    assert ray["vs"] == pytest.approx(ray["steps"]["median"] / local["steps"]["median"])
    assert (tmp_path / "bench_ray.png").is_file()
    assert not md.exists()  # --quick leaves BENCHMARKS.md alone


def test_bench_options_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ray", "--nodes", "3", "--workers", "2"]) == 2
    assert "--nodes must be in 1..--workers" in capsys.readouterr().err
