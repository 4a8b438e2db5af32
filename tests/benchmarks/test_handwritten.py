"""`python -m benchmarks handwritten`: its quick path, shrunk further (the PPO part
runs whole training processes and is left to the benchmark run itself)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def test_handwritten_quick(bench: Callable[..., dict[str, Any]]) -> None:
    data = bench("handwritten", "--quick", "--parts", "adam", "tensorboard", "--dqn-updates", "20")
    results = data["results"]
    assert set(results["adam"]) == {"FlatAdam", "torch Adam (fused)", "torch Adam (foreach)"}
    for row in results["adam"].values():
        assert row["update_s"]["median"] > 0
    assert results["tensorboard"]["SummaryWriter"]["install_mb"] > 0
    assert "FlatAdam update time" in data["key_ratios"]
