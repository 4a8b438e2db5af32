"""`python -m benchmarks td3`: the quick path end to end (pararl's TD3 and SB3's on
HalfCheetah, a tiny budget), one row of the comparison harness."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.conftest import PNG

pytest.importorskip("mujoco")
pytest.importorskip("stable_baselines3")


@pytest.mark.slow
def test_quick_runs_both_systems(bench: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    data = bench(
        "td3", "--quick", "--budget", "400", "--learning-starts", "300", "--eval-every", "200"
    )  # fmt: skip
    runs = data["results"]["runs"]
    assert [r["system"] for r in runs] == ["pararl", "sb3"]
    for run in runs:
        assert run["ok"], run["note"]
        assert run["env_steps"] >= 400
    pararl, sb3_run = runs
    assert sb3_run["updates"] == 400 - 300  # one update per env step after the random ones
    assert 0 < pararl["updates"] <= pararl["env_steps"] - 300
    assert (tmp_path / "bench_td3.png").read_bytes().startswith(PNG)
    assert "HalfCheetah pararl TD3 (async): final" in data["key_ratios"]
