"""The thread-count rules (`pararl.mp.threads`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest
import torch

from pararl.models.build import q_network
from pararl.mp import threads
from pararl.mp.threads import (
    AdaptiveThreads,
    LentCores,
    Probing,
    every_core_threads,
    is_convolutional,
    maml_threads,
    ppo_threads,
    set_learner_threads,
    takes_every_core,
    torch_threads,
)
from pararl.mp.topology import physical_cores


def test_an_update_the_env_workers_wait_for_takes_every_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threads, "physical_cores", lambda: 4)
    small, large = 10_000, 2_000_000
    assert ppo_threads(small, "sync", 2) == (1, 1)  # small networks keep one thread
    # acting gets the cores the 2 workers leave; the update, which they wait for, all
    assert ppo_threads(large, "sync", 2) == (2, 4)
    assert ppo_threads(large, "serial", 2) == (4, 4)  # no workers beside it
    assert ppo_threads(large, "ray", 2) == (2, 2)  # Ray actors do not wait for it
    assert ppo_threads(large, "sync", 2, given=3) == (3, 3)  # --learner-threads holds
    assert maml_threads() == (1, 4)  # MAML acts on one, its outer step on every core
    assert maml_threads(2) == (1, 2)


def test_a_convolutional_or_wide_learner_beside_actors_takes_every_core() -> None:
    cnn = q_network("minatar-cnn", (10, 10, 4), np.dtype(np.bool_), 3, (128,))
    mlp = q_network("mlp", (4,), np.dtype(np.float32), 2, (64, 64))
    assert is_convolutional(cnn)
    assert not is_convolutional(mlp)
    modes = ("serial", "sync", "async", "ray")
    assert [takes_every_core(m, True, 32) for m in modes] == [False, False, True, True]
    assert not takes_every_core("async", False, 64)  # DQN's MLP batch on CartPole
    assert [takes_every_core(m, False, 256) for m in modes] == [False, False, True, True]
    with torch_threads(None):  # restores the count after
        assert set_learner_threads(10_000, 1, every_core=True) == physical_cores()
        assert torch.get_num_threads() == physical_cores()
        assert set_learner_threads(10_000, 1) == 1  # a small model, otherwise
        assert set_learner_threads(10_000, 1, given=3, every_core=True) == 3  # given wins
        big = set_learner_threads(5_000_000, busy_processes=physical_cores())
        assert big == 1  # the cores its workers leave, at least one


def test_an_update_everyone_waits_for_takes_every_core_unless_told() -> None:
    assert every_core_threads() == physical_cores()
    assert every_core_threads(given=3) == 3


def test_torch_threads_holds_a_count_for_a_block_and_restores_it() -> None:
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_one_thread_reaches_native_libraries_loaded_after_it() -> None:
    """A child pinned before it imports torch runs torch on one thread."""
    code = (
        "from pararl.mp.threads import one_thread; one_thread(); "
        "import torch, os; print(torch.get_num_threads(), os.environ['OMP_NUM_THREADS'])"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1"]


class Simulated:
    """A learner whose update takes `cost(threads, now)` seconds, on a simulated
    clock, driving an `AdaptiveThreads` the way the off-policy loop does (four
    updates per turn)."""

    def __init__(self, wide: int, cost: Callable[[int, float], float], hold: bool = False) -> None:
        self.now, self.cost, self.lines = 0.0, cost, list[str]()
        self.set_calls: list[int] = []
        self.governor = AdaptiveThreads(
            wide,
            self.lines.append,
            hold,
            set_threads=self.set_calls.append,
            settings=Probing(clock=lambda: self.now),
        )
        self.updates = 0

    def run_until(self, end: float) -> int:
        """Updates made from now until `end` (simulated seconds)."""
        start = self.updates
        while self.now < end:
            seconds = 4 * self.cost(self.governor.threads, self.now)
            self.now += seconds
            self.updates += 4
            self.governor.record(4, seconds)
        return self.updates - start


def quiet(threads: int, now: float) -> float:
    return 0.008 if threads == 2 else 0.010  # two threads 1.25x faster, as SAC's step


def test_on_idle_cores_the_learner_keeps_its_threads_and_probes_ever_less_often() -> None:
    sim = Simulated(2, quiet)
    sim.run_until(3600.0)
    gov = sim.governor
    assert gov.threads == 2
    assert gov.switches == 0
    assert sim.lines == []
    assert gov.every == gov.settings.max_probe_s  # each probe that changed nothing doubled the wait
    probes = sim.set_calls.count(1)
    assert 8 <= probes <= 12  # at 4, 34, 94, 214, ... s, then every 600 s
    # what the probes cost: the updates lost against two threads all the time
    assert sim.updates >= 0.99 * 3600.0 / 0.008


def test_a_learner_slowed_by_work_beside_it_drops_to_one_thread_and_comes_back() -> None:
    """Two threads collapse 60x while the cores are shared (from 100 s to 400 s),
    one thread slows only 2x; the governor moves to one thread within a couple of
    windows, and back to two after the cores are free."""

    def shared(threads: int, now: float) -> float:
        if 100.0 <= now < 400.0:
            return 0.5 if threads == 2 else 0.020
        return quiet(threads, now)

    sim = Simulated(2, shared)
    sim.run_until(100.0)
    assert sim.lines == []  # no switch while the cores were free (a probe may be running)
    sim.run_until(110.0)
    assert sim.governor.threads == 1  # the collapsed window triggered a probe at once
    assert len(sim.lines) == 1
    assert "learner on 1 thread(s)" in sim.lines[0]
    during = sim.run_until(400.0)
    assert during >= 0.9 * 290.0 / 0.020  # probes of two threads cost little
    sim.run_until(400.0 + 300.0)
    assert sim.governor.threads == 2  # a probe found the cores free
    assert len(sim.lines) == 2
    assert "learner on 2 thread(s)" in sim.lines[1]
    assert "free again" in sim.lines[1]


def test_a_machine_busy_from_the_start_moves_the_learner_to_one_thread_within_seconds() -> None:
    """Two threads 25x slower than one from the first update: no faster window on two
    to collapse from, so it is the first probe, due a few seconds in, that finds it."""
    sim = Simulated(2, lambda threads, now: 0.5 if threads == 2 else 0.020)
    sim.run_until(10.0)
    assert sim.governor.threads == 1
    assert len(sim.lines) == 1
    assert "something else is using the cores" in sim.lines[0]


def test_a_machine_slower_for_every_count_is_probed_once_not_every_window() -> None:
    """Everything 3.5x slower from 100 s on, two threads still the faster: one
    probe, then the slower rate is the new normal."""

    def slower(threads: int, now: float) -> float:
        return quiet(threads, now) * (3.5 if now >= 100.0 else 1.0)

    sim = Simulated(2, slower)
    sim.run_until(100.0)
    before = sim.set_calls.count(1)
    sim.run_until(150.0)
    assert sim.set_calls.count(1) == before + 1
    assert sim.governor.threads == 2
    assert sim.lines == []


def test_one_thread_a_given_count_or_no_updates_leave_nothing_to_decide() -> None:
    sim = Simulated(1, lambda threads, now: 0.5)
    sim.run_until(3600.0)
    sim.governor.record(0, 10.0)
    assert sim.set_calls == []
    assert sim.governor.threads == 1
    held = Simulated(2, lambda threads, now: 0.5 if threads == 2 else 0.01, hold=True)
    held.run_until(3600.0)
    assert held.set_calls == []
    assert held.governor.threads == 2  # what metrics.csv shows: the count it runs on


class Lending:
    """A `LentCores` on a simulated clock: steps take `own_s` on the learner's threads
    and `lent_s` on every core; the actors wait from step `idle_from` of each update."""

    def __init__(self, own_s: float, lent_s: float, idle_from: int, **settings: int) -> None:
        self.now, self.own_s, self.lent_s, self.idle_from = 0.0, own_s, lent_s, idle_from
        self.step, self.set_calls = 0, []
        self.lent = LentCores(
            lambda: self.step >= self.idle_from, 2, clock=lambda: self.now,
            set_threads=self.set_calls.append, **settings,
        )  # fmt: skip

    def update(self, steps: int = 16) -> float:
        self.lent.start(1)
        for self.step in range(steps):
            self.lent()
            self.now += self.lent_s if self.lent.threads == 2 else self.own_s
        return self.lent.finish()


def test_the_update_takes_the_actors_cores_once_they_wait_for_weights() -> None:
    sim = Lending(own_s=0.004, lent_s=0.003, idle_from=10)
    assert sim.update() == pytest.approx((10 * 1 + 6 * 2) / 16)  # mean threads over steps
    assert sim.set_calls == [2]  # widened once, at step 10; the caller restores the count
    for _ in range(20):
        assert sim.update() == pytest.approx(22 / 16)  # faster lent: it keeps lending
    assert sim.lent.paused == 0
    never = Lending(own_s=0.004, lent_s=0.003, idle_from=99)
    assert never.update() == 1.0  # the actors never waited
    assert never.set_calls == []


def test_lending_that_does_not_speed_the_steps_pauses_then_is_tried_again() -> None:
    # another run holds the cores: a wider step waits at its barriers
    sim = Lending(own_s=0.004, lent_s=0.006, idle_from=10, judge_steps=12, pause=5)
    # 5 lent steps timed an update (its last is not): judged after the third
    assert [sim.update() for _ in range(3)] == [pytest.approx(22 / 16)] * 3
    assert sim.lent.paused == 5
    assert [sim.update() for _ in range(6)] == [1.0] * 5 + [pytest.approx(22 / 16)]
    # the actors wait from the first step: one update on its own threads to compare with
    faster = Lending(own_s=0.004, lent_s=0.003, idle_from=0, judge_steps=12)
    assert [faster.update() for _ in range(4)] == [2.0, 1.0, 2.0, 2.0]
    slower = Lending(own_s=0.004, lent_s=0.006, idle_from=0, judge_steps=12, pause=3)
    assert [slower.update() for _ in range(6)] == [2.0, 1.0, 1.0, 1.0, 1.0, 2.0]


def test_lending_is_judged_against_own_steps_of_the_machine_as_it_is_now() -> None:
    """The actors wait from every update's first step, so own-thread steps come only
    from the comparison's update: one slowed by something passing (an evaluation
    process starting) must not stand for ever. After `pause` updates without one, an
    update runs on its own threads again, and slower lending then pauses."""
    sim = Lending(own_s=0.010, lent_s=0.003, idle_from=0, judge_steps=12, pause=5)
    assert [sim.update() for _ in range(2)] == [2.0, 1.0]  # the comparison, 10 ms a step
    sim.own_s, sim.lent_s = 0.004, 0.006  # now: lent steps slower than own ones
    # lent on the stale comparison until it is `pause` updates old, then one update on
    # its own threads, and lending, now slower, pauses for `pause` updates
    assert [sim.update() for _ in range(11)] == [2.0] * 5 + [1.0] + [1.0] * 5
