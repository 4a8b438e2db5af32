"""`python -m benchmarks td3`: the quick path end to end (pararl's TD3 on HalfCheetah, a
tiny budget), one row of the comparison harness. Its anchor, SB3's TD3 with rl-zoo's
settings, learns from `--set learning_starts=N` in test_compare's
test_sb3_td3_anchor_learns_with_the_zoo_settings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks import learning
from benchmarks.lib import compare

pytest.importorskip("mujoco")
pytest.importorskip("stable_baselines3")


@pytest.mark.slow
def test_quick_runs_both_systems(bench: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    args = ("--budget", "300", "--learning-starts", "200", "--eval-every", "300")
    data = bench("td3", "--quick", *args, "--systems", "pararl", figure=False)
    [pararl] = data["results"]["runs"]
    assert pararl["ok"], pararl["note"]
    assert pararl["env_steps"] >= 300
    assert 0 < pararl["updates"] <= pararl["env_steps"] - 200
    assert "HalfCheetah pararl TD3 (async): final" in data["key_ratios"]


def test_both_systems_start_learning_where_the_option_says(tmp_path: Path) -> None:
    td3 = learning.benchmark("td3")
    c = td3.resolve(learning.OffPolicyConfig(learning_starts=300))
    row = compare.with_options(td3.ROW, c)
    pararl = compare.pararl_command(row, c, row.system("pararl"), "HalfCheetah-v5", 0, tmp_path)
    assert pararl[pararl.index("--learning-starts") + 1] == "300"
    anchor = compare.anchor_command(row, c, row.system("sb3"), "HalfCheetah-v5", 0, tmp_path)
    assert anchor[anchor.index("--set") + 1 :] == ["learning_starts=300"]
