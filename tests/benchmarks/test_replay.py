"""`python -m benchmarks replay`: a tiny run end to end (frames stored once cost about
one frame per transition, the naive memory eight); bad options exit with code 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from benchmarks.__main__ import main


def test_tiny_run(bench: Callable[..., dict[str, Any]]) -> None:
    small = ["--capacity", "600", "--naive-capacity", "300"]
    data = bench("replay", "--quick", *small, "--batches", "5", "--repeats", "1")
    rows = {(r["kind"], r["sampling"]): r for r in data["results"]}
    assert set(rows) == {(k, s) for k in ("frames", "naive") for s in ("uniform", "prioritized")}
    assert rows[("frames", "uniform")]["per_frame"] <= 1.05
    assert rows[("naive", "uniform")]["per_frame"] >= 8.0
    for (kind, sampling), row in rows.items():
        assert len(row["batch_ms"]["samples"]) == 1  # one spell of the one repeat
        if sampling == "prioritized":  # the sum tree's bytes come on top of the memory's
            assert row["bytes_per_transition"] > rows[(kind, "uniform")]["bytes_per_transition"]
    assert "frames / naive bytes per transition" in data["key_ratios"]


@pytest.mark.parametrize("args", [["--capacity", "0"], ["--batches", "0"]])
def test_bad_options_exit_with_code_2(args: list[str]) -> None:
    assert main(["replay", "--quick", *args]) == 2
