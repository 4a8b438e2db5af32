"""`python -m benchmarks sac`: the quick path end to end (pararl and SB3 on
HalfCheetah, a tiny budget and networks), and its report on made-up runs: the time to
reach SB3's final return, the ratios, the published figures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main
from benchmarks.lib.harness import Metadata
from benchmarks.lib.training import Run

from benchmarks import sac
from tests.benchmarks.conftest import PNG

pytest.importorskip("mujoco")
pytest.importorskip("stable_baselines3")


def test_quick_runs_both_systems(bench: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    data = bench(
        "sac", "--quick", "--budget", "600", "--learning-starts", "300", "--hidden", "16",
        "--eval-every", "300",
    )  # fmt: skip
    runs = data["results"]["runs"]
    assert [r["system"] for r in runs] == ["pararl", "sb3"]
    for run in runs:
        assert run["ok"], run["note"]
        assert run["env_steps"] >= 600
        assert [p["env_steps"] for p in run["curve"]][-1] >= 600
    pararl, sb3_run = runs
    assert pararl["note"].startswith("learner on ")  # what pararl chose for the run
    # one update per env step after the random ones (SB3: exactly; pararl: within
    # the chunk it takes in at the end of the budget)
    assert sb3_run["updates"] == 600 - 300
    assert 600 - 300 - 64 <= pararl["updates"] <= pararl["env_steps"] - 300
    assert (tmp_path / "bench_sac.png").read_bytes().startswith(PNG)
    assert "HalfCheetah-v5: pararl final" in data["key_ratios"]


def curve(*points: tuple[float, float, float]) -> list[dict[str, float]]:
    return [{"env_steps": s, "wall_s": w, "eval_return": r} for s, w, r in points]


def test_report_reaches_sb3s_final_and_names_the_published_figures() -> None:
    runs = [
        Run("pararl", "HalfCheetah-v5", 0, 100.0, True, 300_000, 290_000,
            curve((1e5, 30.0, 2000.0), (2e5, 60.0, 4000.0), (3e5, 100.0, 5000.0))),
        Run("sb3", "HalfCheetah-v5", 0, 400.0, True, 300_000, 290_000,
            curve((1e5, 130.0, 1500.0), (2e5, 260.0, 3000.0), (3e5, 400.0, 4000.0))),
        Run("pararl", "Hopper-v5", 0, 90.0, False, note="Traceback: boom"),
    ]  # fmt: skip
    config = sac.Config(final_evals=1)
    report = sac.report(sac.Result(config, runs), Metadata("x", {}))
    # SB3 ends at 4000; pararl's first evaluation there is at 60 s: 0.15 of SB3's 400 s
    assert report.key_ratios.startswith(
        "HalfCheetah-v5: pararl final 5000 vs SB3 4000, wall ÷ SB3 0.25×, "
        "SB3's final reached in 0.15× SB3's wall time"
    )
    text = "\n".join(report.blocks)
    assert "9535 ± 100" in text  # rl-zoo's HalfCheetah
    assert "2310 ± 343" in text  # CleanRL's Hopper
    assert "boom" in text
    assert len(report.panels) == 4  # return against steps and wall time, per env


def test_bad_options_are_refused() -> None:
    assert main(["sac", "--runs", "HalfCheetah-v5"]) == 2
    assert main(["sac", "--budget", "0"]) == 2
    assert main(["sac", "--hidden", "0"]) == 2
