"""`python -m benchmarks handwritten`: the adam, tensorboard and stacked parts end to end in
this process (their fresh-interpreter timings stubbed: seconds each)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from benchmarks import handwritten


def test_handwritten_quick(
    bench: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handwritten, "construct_s", lambda name: 0.5)
    monkeypatch.setattr(handwritten, "import_s", lambda kind: 0.1)
    data = bench("handwritten", "--quick", "--parts", "adam", "tensorboard", "--dqn-updates", "20")
    results = data["results"]
    assert set(results["adam"]) == {"FlatAdam", "torch Adam (fused)", "torch Adam (foreach)"}
    for row in results["adam"].values():
        assert len(row["update_s"]["samples"]) == len(row["construct_s"]["samples"])
        assert row["construct_s"]["median"] == 0.5  # the fresh-interpreter timing, stubbed
    board = results["tensorboard"]
    for writer in ("pararl", "SummaryWriter"):
        assert board[writer]["import_s"]["median"] == 0.1  # stubbed as well
    assert "FlatAdam update time" in data["key_ratios"]


def test_stacked_quick(bench: Callable[..., dict[str, Any]]) -> None:
    data = bench("handwritten", "--quick", "--parts", "stacked")
    stacked = data["results"]["stacked"]
    assert set(stacked) == {"stacked layers", "torch.func vmap", "separate learners"}
    assert all(row["median"] > 0 for row in stacked.values())
    assert "torch.func vmap step ÷ stacked layers" in data["key_ratios"]
