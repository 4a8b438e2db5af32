"""`python -m benchmarks mujoco`: the quick path end to end on real processes (pararl
and SB3 on HalfCheetah, a few thousand steps), and its report on made-up runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from benchmarks.__main__ import main
from benchmarks.lib.compare import Outcome, Run, report

from benchmarks import learning
from tests.benchmarks.conftest import PNG

pytest.importorskip("mujoco")
pytest.importorskip("stable_baselines3")


def test_quick_runs_both_systems(bench: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    data = bench("mujoco", "--quick", "--budget", "2048", "--eval-every", "2048")
    runs = data["results"]["runs"]
    assert [r["system"] for r in runs] == ["pararl", "sb3"]
    for run in runs:
        assert run["ok"], run["note"]
        assert run["status"] == "step budget reached"
        assert run["env_steps"] >= 2048
        # both: 10 epochs of 64-sample minibatches over every rollout
        assert run["updates"] == 10 * run["env_steps"] // 64
        assert [p["env_steps"] for p in run["curve"]][-1] >= 2048
    assert (tmp_path / "bench_mujoco.png").read_bytes().startswith(PNG)
    assert "wall ÷ SB3 PPO + VecNormalize" in data["key_ratios"]


def test_report_names_the_published_figures_and_the_ratios() -> None:
    curve = [
        {"env_steps": s, "wall_s": s / 1e3, "eval_return": r} for s, r in ((1e5, 800), (2e5, 1600))
    ]
    runs = [
        Run("pararl", "HalfCheetah-v5", 0, 100.0, True, 200_000, 9_000, curve),
        Run("sb3", "HalfCheetah-v5", 0, 400.0, True, 200_000, 9_000, curve[:1]),
        Run("pararl", "Hopper-v5", 0, 90.0, False, note="Traceback: boom"),
    ]
    c = SimpleNamespace(budget=200_000, eval_every=100_000, eval_episodes=10, final_evals=1,
                        keep_dir=None)  # fmt: skip
    ratios, blocks, panels = report(learning.MUJOCO, Outcome("mujoco", runs), c)
    # SB3 ends at 800; pararl's first evaluation there is at 100 s: 0.25 of SB3's 400 s
    assert ratios.startswith(
        "HalfCheetah pararl PPO: final 1600 vs SB3 PPO + VecNormalize 800, wall ÷ SB3 PPO + "
        "VecNormalize 0.25×, SB3 PPO + VecNormalize's final reached in 0.25× its wall time"
    )
    text = "\n".join(blocks)
    assert "1443 ± 46" in text
    assert "2383 ± 272" in text
    assert "boom" in text
    assert len(panels) == 4  # return against steps and wall time, per env


def test_bad_runs_are_refused() -> None:
    assert main(["mujoco", "--runs", "HalfCheetah-v5"]) == 2
    assert main(["mujoco", "--budget", "0"]) == 2
    assert main(["mujoco", "--systems", "cleanrl"]) == 2
