"""`--mode auto` for PPO: chosen from the measured env step time."""

from __future__ import annotations

import functools

import gymnasium as gym

import pararl.envs  # noqa: F401  (registers the pararl/... ids)
from pararl.runners.ppo_mode import ROUND_TRIP_S, choose_mode, measure_step_s


def _step_cost(us: float) -> functools.partial[gym.Env]:
    return functools.partial(gym.make, "pararl/StepCost-v0", cost_us=us)


def test_measured_step_time_tracks_the_env_cost() -> None:
    assert 300e-6 < measure_step_s(_step_cost(400.0)) < 2e-3


def test_cheap_envs_stay_in_process_and_costly_ones_go_to_workers() -> None:
    cheap = choose_mode("auto", _step_cost(1.0), num_envs=8, workers=2)
    costly = choose_mode("auto", _step_cost(400.0), num_envs=8, workers=2)
    assert cheap.mode == "serial"
    assert costly.mode == "sync"
    assert costly.env_step_s is not None
    assert costly.env_step_s * 8 * 0.5 > ROUND_TRIP_S
    assert "round trip" in costly.reason


def test_explicit_mode_and_one_core_are_not_measured() -> None:
    assert choose_mode("sync", _step_cost(1.0), 8, 2).mode == "sync"
    single = choose_mode("auto", _step_cost(400.0), 8, 1)
    assert (single.mode, single.env_step_s) == ("serial", None)
