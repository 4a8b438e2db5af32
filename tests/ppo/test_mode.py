"""`--mode auto` for PPO: chosen from the measured env step time."""

from __future__ import annotations

import functools
from pathlib import Path

import gymnasium as gym

import pararl.envs  # noqa: F401  (registers the pararl/... ids)
from pararl.runners.ppo_mode import choose_mode, measure_step_s, round_trip_s

TRIP_S = 180e-6  # a round trip, as measured on a 2-core machine


def _step_cost(us: float) -> functools.partial[gym.Env]:
    return functools.partial(gym.make, "pararl/StepCost-v0", cost_us=us)


def test_measured_step_time_tracks_the_env_cost() -> None:
    assert 300e-6 < measure_step_s(_step_cost(400.0)) < 2e-3


def test_cheap_envs_stay_in_process_and_costly_ones_go_to_workers() -> None:
    cheap = choose_mode("auto", _step_cost(1.0), num_envs=8, workers=2, round_trip=lambda: TRIP_S)
    costly = choose_mode(
        "auto", _step_cost(400.0), num_envs=8, workers=2, round_trip=lambda: TRIP_S
    )
    assert cheap.mode == "serial"
    assert costly.mode == "sync"
    assert costly.env_step_s is not None
    assert costly.env_step_s * 8 * 0.5 > TRIP_S
    assert "round trip" in costly.reason


def test_explicit_mode_and_one_core_are_not_measured() -> None:
    assert choose_mode("sync", _step_cost(1.0), 8, 2).mode == "sync"
    single = choose_mode("auto", _step_cost(400.0), 8, 1)
    assert (single.mode, single.env_step_s) == ("serial", None)


def test_round_trip_is_measured_once_per_machine_and_cached(tmp_path: Path) -> None:
    cache = tmp_path / "pararl" / "machine.json"
    first = round_trip_s(cache)
    assert 0.0 <= first < 0.05
    assert cache.is_file()
    cache.write_text(cache.read_text().replace(str(first), "0.123"))
    assert round_trip_s(cache) == 0.123  # read back, not measured again
    cache.write_text("not json")
    assert 0.0 <= round_trip_s(cache) < 0.05  # a broken cache is measured anew
