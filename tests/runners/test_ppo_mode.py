"""`--mode auto` for PPO: the decision from the env's step time and this machine's
round trip (both injected: no timing window to hit on a loaded machine), how a step
time is measured (on an injected clock), and the per-machine cache of the round trip."""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path

import gymnasium as gym
import pytest

import pararl.envs  # noqa: F401  (registers the pararl/... ids)
from pararl.runners import ppo_mode
from pararl.runners.ppo_mode import choose_mode, measure_step_s, round_trip_s

TRIP_S = 180e-6  # a round trip, as measured on a 2-core machine
CARTPOLE = functools.partial(gym.make, "CartPole-v1")


def _choose(step_s: float, num_envs: int = 8, workers: int = 2) -> ppo_mode.ModeChoice:
    return choose_mode(
        "auto", CARTPOLE, num_envs, workers, round_trip=lambda: TRIP_S, step_time=lambda _: step_s
    )


def test_workers_pay_when_the_envs_time_they_spare_outweighs_a_round_trip() -> None:
    # 2 workers spare half the envs' stepping: 8 envs x 40 us x 1/2 = 160 us < 180 us
    assert _choose(40e-6).mode == "serial"
    # ... 8 x 50 us x 1/2 = 200 us > 180 us
    costly = _choose(50e-6)
    assert (costly.mode, costly.env_step_s) == ("sync", 50e-6)
    assert "spare 200 µs per step, a round trip costs ~180 µs" in costly.reason
    # more workers spare more of it: 4 workers x 40 us x 8 envs x 3/4 = 240 us
    assert _choose(40e-6, workers=4).mode == "sync"


def test_explicit_mode_and_one_core_are_not_measured() -> None:
    def never(*_: object) -> float:
        raise AssertionError("measured")

    assert choose_mode("sync", CARTPOLE, 8, 2, round_trip=never, step_time=never).mode == "sync"
    single = choose_mode("auto", CARTPOLE, 8, 1, round_trip=never, step_time=never)
    assert (single.mode, single.env_step_s) == ("serial", None)


def test_step_time_is_the_mean_of_timed_steps_without_resets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each step is timed between two clock reads; on a clock that advances 1 ms a
    read, every step takes 1 ms, whatever the episodes' resets in between."""
    ticks = itertools.count()
    monkeypatch.setattr(ppo_mode.time, "perf_counter", lambda: next(ticks) * 1e-3)
    assert measure_step_s(functools.partial(gym.make, "pararl/StepCost-v0")) == 1e-3


def test_round_trip_is_measured_once_per_machine_and_cached_for_a_week(tmp_path: Path) -> None:
    cache, measured = tmp_path / "pararl" / "machine.json", itertools.count(1)

    def measure() -> float:
        return next(measured) / 10_000

    day = 24 * 3600.0
    assert round_trip_s(cache, measure, lambda: 0.0) == 1e-4
    assert round_trip_s(cache, measure, lambda: 6 * day) == 1e-4  # read back, not measured
    assert round_trip_s(cache, measure, lambda: 8 * day) == 2e-4  # a week old: measured again
    assert round_trip_s(cache, measure, lambda: 9 * day) == 2e-4
    assert round_trip_s(cache, measure, lambda: 7 * day) == 3e-4  # from the future: anew
    cache.write_text("not json")
    assert round_trip_s(cache, measure, lambda: 7 * day) == 4e-4  # a broken cache: anew
    cache.write_text(json.dumps({ppo_mode._machine_key(): {"round_trip_s": 0.9}}))
    assert round_trip_s(cache, measure, lambda: 7 * day) == 5e-4  # no date: anew


def test_a_round_trip_is_measured_on_real_workers() -> None:
    """Two workers stepping CartPole: a step's round trip less the envs' own time."""
    assert 0.0 <= ppo_mode.measure_round_trip(envs_per_worker=1) < 0.5
