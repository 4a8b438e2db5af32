"""`python -m benchmarks masks`: the quick path end to end (pararl's masked PPO and
sb3-contrib's MaskablePPO on Taxi-v4, a tiny budget), one row of the comparison harness."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.lib import compare, sb3, taxi

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")


@pytest.mark.slow
def test_quick_runs_both_systems(bench: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    data = bench("masks", "--quick", "--budget", "1024", "--eval-every", "1024", figure=False)
    runs = data["results"]["runs"]
    assert [r["system"] for r in runs] == ["pararl", "sb3"]
    for run in runs:
        assert run["ok"], run["note"]
        assert run["env_steps"] >= 1_024
        assert run["curve"], "no evaluation"
    for run in runs:  # one rollout of 8 x 128, 4 epochs of 4 minibatches
        assert run["updates"] == 4 * 4, run["system"]
    assert "TaxiOneHot pararl PPO (masked): final" in data["key_ratios"]


def test_both_systems_see_the_one_hot_state_and_taxis_own_mask() -> None:
    """The env both run: Taxi's state one-hot, and the anchor's `ActionMasker` reads
    the mask Taxi computes for the state it is in (its info's), step after step."""
    import numpy as np

    env = sb3.masked_env(taxi.ENV, True)()
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        state = env.unwrapped.s
        assert obs.shape == (500,)
        assert obs.sum() == 1
        assert obs[state] == 1
        mask = env.action_masks()
        assert mask.dtype == np.bool_
        assert mask.tolist() == env.unwrapped.action_mask(state).astype(bool).tolist()
        obs, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if terminated or truncated:
            obs, _ = env.reset()
    assert compare.family(taxi.ENV) == "TaxiOneHot"
