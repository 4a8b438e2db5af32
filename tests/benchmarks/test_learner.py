"""`python -m benchmarks learner`: a tiny run end to end (pararl's plain step and SB3's
train() timed on the same networks; FLOPs, the floor and the ratios follow from the
rates measured); bad options exit with code 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from benchmarks.__main__ import main

from benchmarks import learner


@pytest.mark.slow
def test_tiny_run(bench: Callable[..., dict[str, Any]]) -> None:
    data = bench(
        "learner", "--quick", "--compile", "off", "--memory", "300", "--seconds", "0.02",
        "--device", "cpu", "--cases", "dqn-mlp", "ppo-minatar", "sac-mlp", "--no-prioritized",
    )  # fmt: skip
    results = data["results"]
    rows = {(r["case"], r["sampling"], r["system"]): r for r in results["rows"]}
    assert set(rows) == {
        ("dqn-mlp", "uniform", "pararl eager"),
        ("dqn-mlp", "uniform", "SB3"),
        ("ppo-minatar", "rollout", "pararl eager"),
        ("ppo-minatar", "rollout", "SB3"),
        ("sac-mlp", "uniform", "pararl eager"),
        ("sac-mlp", "uniform", "SB3"),
    }
    peak = results["peak_gflops"]["1 thread"]
    assert peak > 0
    for case in ("dqn-mlp", "ppo-minatar", "sac-mlp"):
        ours = next(r for (c, _, s), r in rows.items() if c == case and s == "pararl eager")
        sb3 = next(r for (c, _, s), r in rows.items() if c == case and s == "SB3")
        assert ours["flops"] > 0
        assert sb3["flops"] == ours["flops"]  # the same matrix work
        rate = ours["updates_per_s"]["median"]
        assert ours["vs_sb3"] == pytest.approx(rate / sb3["updates_per_s"]["median"])
        assert ours["floor_ms"] == pytest.approx(ours["flops"] / (peak * 1e9) * 1e3, rel=0.01)
        assert ours["gflops"] == pytest.approx(ours["flops"] * rate / 1e9)
        for row in (ours, sb3):  # where the time goes: every part measured
            split = row["split"]
            assert split["matrix_ms"] > 0
            assert split["other_ms"] > 0
            assert split["outside_ms"] >= 0
            assert split["calls"] >= 10
    # the CartPole MLP 4 -> 256 -> 256 -> 2 on batches of 64, double DQN: three forward
    # passes (target, online on the next states, online) and one backward (twice the
    # forward): 5 x 2 x 64 x (4x256 + 256x256 + 256x2) multiply-adds
    dqn = rows[("dqn-mlp", "uniform", "pararl eager")]
    assert dqn["flops"] == pytest.approx(5 * 2 * 64 * (4 * 256 + 256 * 256 + 256 * 2), rel=0.05)
    assert "dqn-mlp pararl eager ÷ SB3" in data["key_ratios"]


def test_replay_learners_are_timed_with_prioritized_sampling_too() -> None:
    """Each step mode of pararl's DQN and SAC with uniform, then prioritized sampling
    (SB3 has none): the rows `--prioritized` adds (built here, not timed)."""
    c = learner.resolve(learner.Config(memory=300, quick=True))
    for case in ("dqn-mlp", "sac-mlp"):
        found = learner.learners(case, c, "cpu", {"eager": "off"})
        rows = [(x.row.sampling, x.row.system) for x in found]
        assert rows == [("uniform", "pararl eager"), ("uniform", "SB3"),
                        ("prioritized", "pararl eager")]  # fmt: skip


@pytest.mark.parametrize(
    "args", [["--seconds", "0"], ["--repeats", "0"], ["--memory", "0"], ["--threads", "-1"]]
)
def test_bad_options_exit_with_code_2(args: list[str]) -> None:
    assert main(["learner", "--quick", *args]) == 2
