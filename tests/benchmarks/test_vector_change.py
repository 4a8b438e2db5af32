"""`python -m benchmarks vector_change`: the quick run times both source trees, each
block importing pararl from its own tree (the base from `git archive`, checked inside
the block), and a ref git does not know exits with code 2 before anything runs."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main

from tests.benchmarks.conftest import PNG


def test_quick_run_times_base_and_this_checkout(
    bench: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    data = bench("vector_change", "--quick", "--block-s", "0.05", "--workers", "1")
    assert (tmp_path / "bench_vector_change.png").read_bytes()[:8] == PNG
    (cell,) = data["results"]["cells"]
    assert (cell["env"], cell["num_envs"]) == ("CartPole-v1", 4)
    for version in ("base", "this"):
        assert len(cell["rates"][version]) == 2
    this, base = (statistics.median(cell["rates"][v]) for v in ("this", "base"))
    assert f"this ÷ base {this / base:.3f} (geometric mean)" in data["key_ratios"]
    assert data["results"]["base_commit"]
    assert "this ÷ base" in data["key_ratios"]


def test_unknown_base_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vector_change", "--quick", "--base", "no-such-ref-anywhere"]) == 2
    assert "--base: 'no-such-ref-anywhere' is not a git ref here" in capsys.readouterr().err
