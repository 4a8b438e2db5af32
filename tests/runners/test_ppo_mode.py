"""`--mode auto` for PPO: the decision from the env's step time and this machine's
round trip (both injected: no timing window to hit on a loaded machine), how a step
time is measured (on an injected clock), the per-machine cache of the round trip, and
an iteration's two sides: how each loop adds them up, and timing them."""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path

import gymnasium as gym
import pytest
import torch

import pararl.envs  # noqa: F401  (registers the pararl/... ids)
from pararl import PPOConfig
from pararl.config import env_kind
from pararl.envs.make import env_factory
from pararl.runners import ppo_mode
from pararl.runners.ppo_mode import (
    LoopSides,
    Threads,
    choose_mode,
    measure_step_s,
    round_trip_s,
    time_sides,
)
from pararl.runners.ppo_state import PPOState

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


def test_an_iterations_sides_add_up_as_each_loop_runs_them() -> None:
    sides = LoopSides(128, acting_s=0.5, stepping_s=0.25, update_own_s=2.0,
                      update_wide_s=1.2, update_sync_s=1.1)  # fmt: skip
    # async: the actors' acting beside the update on its own thread (a quarter of
    # the update), then the update's rest on every core
    assert sides.async_s(1) == pytest.approx(0.5 + 0.75 * 1.2)
    assert sides.async_s(2) == pytest.approx(0.25 + (1 - 0.25 / 2.0) * 1.2)
    # acting that outlasts the update bounds the iteration
    assert LoopSides(128, 3.0, 1.0, 2.0, 1.2, 1.2).async_s(1) == 3.0
    # with --policy-lag 0 the actors wait for each update: one after the other, the
    # update on every core
    assert sides.async_s(1, lag=0) == pytest.approx(0.5 + 1.2)
    # sync: the forward passes here, the envs' steps on 2 workers at once, a round
    # trip each step, then the update on sync's threads
    assert sides.sync_s(2, 1e-4) == pytest.approx(0.25 + 0.125 + 128 * 1e-4 + 1.1)


def _small_state() -> PPOState:
    with gym.make("CartPole-v1") as env:
        spaces = env.observation_space, env.action_space
    cfg = PPOConfig(env="CartPole-v1", num_steps=8, hidden=(8,), act_device="cpu")
    torch.manual_seed(0)  # what the run's own state would draw from
    return PPOState(cfg.for_env(env_kind(*spaces)), *spaces, 4)


def test_timing_an_iterations_sides_leaves_the_run_as_it_was() -> None:
    """The timer acts a real rollout and updates on it; torch's global stream and
    thread count are as they were after it (a seeded run's weights do not depend on
    whether `auto` timed)."""
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    threads_before = torch.get_num_threads()
    fn = env_factory("CartPole-v1", training=True)
    sides, counts = time_sides(_small_state, fn, 4, 5e-6, lambda _: Threads(1, 1, 1), 3)
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads_before
    assert counts == Threads(1, 1, 1)
    assert sides.steps == 8
    assert 0 < sides.stepping_s <= sides.acting_s
    assert sides.stepping_s == pytest.approx(min(sides.acting_s, 5e-6 * 4 * 8))
    assert sides.update_own_s == sides.update_wide_s == sides.update_sync_s > 0
