"""`python -m benchmarks minatar_ab`: a tiny run end to end (both systems trained,
each final policy evaluated greedy and sampled on the same episodes); bad options
exit with code 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from benchmarks.__main__ import main
from benchmarks.lib.compare import whole


def test_tiny_run(bench: Callable[..., dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    data = bench("minatar_ab", "--quick", "--budget", "1024", "--episodes", "1", figure=False)
    runs = data["results"]["runs"]
    assert [(r["system"], r["env"], r["seed"]) for r in runs] == [
        ("pararl", "MinAtar/Breakout-v1", 0),
        ("sb3", "MinAtar/Breakout-v1", 0),
    ]
    for run in runs:
        assert run["ok"], run["note"]
        # no evaluation while it trained; pararl evaluates the final weights at its end
        ends = [p["env_steps"] for p in run["curve"]]
        assert ends == ([run["env_steps"]] if run["system"].startswith("pararl") else [])
        assert run["env_steps"] >= 1024
        extra = run["extra"]
        assert extra["greedy"] is not None
        assert extra["sampled"] is not None
        assert 0 < extra["entropy"] <= 1.1 + 1e-6  # Breakout-v1: 3 actions, ln 3 = 1.099
        assert extra["train"] == run["train_return"] >= 0
    mine, theirs = (whole(r["extra"]["sampled"]) for r in runs)  # medians of one seed
    assert f"sampled {mine} vs {theirs}" in data["key_ratios"]
    body = capsys.readouterr().out  # --quick: the section on stdout
    assert "sampled evaluation, median (min–max)" in body
    assert "policy entropy (nats)" in body


@pytest.mark.parametrize(
    "args", [["--runs", "MinAtar/Breakout-v1"], ["--episodes", "0"], ["--systems", "x"]]
)
def test_bad_options_exit_with_code_2(args: list[str]) -> None:
    assert main(["minatar_ab", "--quick", *args]) == 2
