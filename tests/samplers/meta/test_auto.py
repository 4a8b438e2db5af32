"""The `auto` recv policy: its cost model on synthetic measurements, its switching
and clock check on a scripted vector env, and the per-worker step times it reads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pararl.samplers.meta import auto as auto_module
from pararl.samplers.meta.auto import Auto
from pararl.samplers.meta.auto_model import WaitRounds, predict
from pararl.vector import ParallelVectorEnv
from tests.vector.conftest import registered_fn


def rounds(round_s: float, steps: tuple[float, ...], forward_s: float, n: int = 20) -> WaitRounds:
    measured = WaitRounds()
    for _ in range(n):
        measured.add(round_s, np.asarray(steps), forward_s)
    return measured


def test_small_spread_waits_for_all() -> None:
    # 2 workers at 4 envs each: 0.30 vs 0.32 ms steps, 0.25 ms of overhead per call.
    measured = rounds(round_s=0.62e-3, steps=(0.30e-3, 0.32e-3), forward_s=0.05e-3)
    p = predict(measured, forward_part_s=0.04e-3, workers=2, cores=2, margin=0.1)
    assert not p.partial
    assert p.t_part_s > 0.9 * p.t_wait_s
    assert p.idle_s == pytest.approx(0.01e-3)


def test_large_spread_with_cheap_forward_collects_partially() -> None:
    # 200 vs 300 ms steps, a 5 ms forward: waiting idles 50 ms a round.
    measured = rounds(round_s=0.31, steps=(0.2, 0.3), forward_s=0.005)
    p = predict(measured, forward_part_s=0.003, workers=2, cores=2, margin=0.1)
    assert p.partial
    assert p.idle_s == pytest.approx(0.05)
    assert p.overhead_s == pytest.approx(0.005)
    assert p.t_part_s == pytest.approx(0.25 + 0.008)


def test_large_spread_does_not_pay_for_a_dear_forward_or_overhead() -> None:
    # The same spread, but 100 ms of overhead per call and a forward that costs as
    # much at half the batch: the extra call costs more than the idle time saved.
    measured = rounds(round_s=0.45, steps=(0.2, 0.3), forward_s=0.05)
    p = predict(measured, forward_part_s=0.1, workers=2, cores=2, margin=0.1)
    assert p.overhead_s == pytest.approx(0.1)
    assert p.t_part_s == pytest.approx(0.45)
    assert not p.partial


def test_one_worker_or_no_measurements_never_collects_partially() -> None:
    measured = rounds(round_s=0.31, steps=(0.3,), forward_s=0.005)
    assert not predict(measured, 0.003, workers=1, cores=8, margin=0.1).partial
    assert not predict(WaitRounds(), 0.003, workers=2, cores=2, margin=0.1).partial


def test_wait_rounds_ignore_rounds_without_every_worker() -> None:
    measured = WaitRounds()
    measured.add(0.1, np.array([0.05, np.nan]), 0.01)
    measured.add(0.1, np.array([]), 0.01)
    assert measured.rounds == 0
    measured.add(0.1, np.array([0.04, 0.06]), 0.01)
    assert measured.step_cv == pytest.approx(0.2)


class ScriptedVenv:
    """Two workers of `n / 2` envs; each recv advances a fake clock by the round time
    of the current mode (wait: `wait_s`; partial: `part_s`, one worker per call)."""

    def __init__(self, clock: list[float], n: int, steps: tuple[float, float]) -> None:
        self.clock, self.n, self.steps = clock, n, steps
        self.wait_s, self.part_s = 0.3, 0.1
        self.reply_seconds = np.asarray(steps)
        self.calls: list[dict[str, Any]] = []
        self._worker = 0

    def recv(self, **kwargs: Any) -> tuple[Any, ...]:
        self.calls.append(kwargs)
        if kwargs.get("min_envs") == 1:
            self.clock[0] += self.part_s
            half = self.n // 2
            ids = np.arange(half) + half * self._worker
            self._worker ^= 1
        else:
            self.clock[0] += self.wait_s
            ids = np.arange(self.n)
        return (None, None, None, None, {}, ids)


def drive(auto: Auto, venv: ScriptedVenv, rounds_: int, cost_calls: list[int]) -> None:
    """One sample: `rounds_` recvs, each after a full-batch 5 ms forward."""
    worker_of = np.repeat([0, 1], venv.n // 2)

    def cost(batch: int) -> float:
        cost_calls.append(batch)
        return 0.003

    auto.begin(venv.n, worker_of, cost)
    for _ in range(rounds_):
        batch = venv.n if auto.mode == "wait" else venv.n // 2
        auto.after_forward(batch, 0.005 * batch / venv.n)
        auto.recv(venv)  # type: ignore[arg-type]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [0.0]
    monkeypatch.setattr(auto_module.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(auto_module, "available_cpus", lambda: [0, 1])
    return now


def test_auto_tries_partial_against_waiting_then_keeps_the_faster_across_samples(
    clock: list[float],
) -> None:
    venv, calls = ScriptedVenv(clock, 8, steps=(0.15, 0.29)), []
    auto = Auto(min_rounds=4, check_rounds=4)
    drive(auto, venv, 6, calls)
    assert [c for c in venv.calls[:5]] == [{}] * 5  # first round + 4 measured rounds
    assert auto.mode == "partial"  # the trial starts with partial collection
    assert auto.decisions[0]["chose"] == "trial"
    assert calls == [4]  # one forward timed, at one worker's batch
    venv.calls.clear()
    drive(auto, venv, 40, calls)  # the trial: partial, wait, wait, partial windows
    modes = ["partial" if c else "wait" for c in venv.calls]
    runs = [m for i, m in enumerate(modes) if i == 0 or m != modes[i - 1]]
    assert runs == ["partial", "wait", "partial"]  # P, W W, P; then partial for good
    assert auto.settled
    assert auto.decisions[-1]["chose"] == "partial"  # 0.1 s per half beats 0.3 s per round
    assert auto.decisions[-1]["partial_rate"] > auto.decisions[-1]["wait_rate"]
    venv.calls.clear()
    drive(auto, venv, 12, calls)  # later samples: partial, nothing measured again
    assert venv.calls == [{"min_envs": 1}] * 12
    assert calls == [4]


def test_auto_keeps_waiting_when_the_trial_finds_partial_slower(
    clock: list[float],
) -> None:
    venv, calls = ScriptedVenv(clock, 8, steps=(0.15, 0.29)), []
    venv.part_s = 0.2  # two partial calls per round: 0.4 s > 0.3 s of waiting
    auto = Auto(min_rounds=4, check_rounds=4)
    drive(auto, venv, 60, calls)
    assert [d["chose"] for d in auto.decisions] == ["trial", "wait"]
    assert auto.decisions[-1]["partial_rate"] < auto.decisions[-1]["wait_rate"]
    venv.calls.clear()
    drive(auto, venv, 20, calls)
    assert venv.calls == [{}] * 20
    assert auto.summary()["mode"] == "wait"


def test_auto_with_small_spread_stays_waiting(clock: list[float]) -> None:
    # predicted 0.2945 s partial vs 0.3 s waiting: less than the 10% margin asked for
    venv, calls = ScriptedVenv(clock, 8, steps=(0.28, 0.29)), []
    auto = Auto(min_rounds=4, margin=0.1)
    drive(auto, venv, 30, calls)
    assert venv.calls == [{}] * 30
    assert [d["chose"] for d in auto.decisions] == ["wait"]
    assert auto.summary()["partial_share"] == 0.0
    assert auto.summary()["step_mean_s"] == pytest.approx(0.285)


def test_reply_seconds_are_each_workers_step_time() -> None:
    fns = [registered_fn("pararl/StepCost-v0", cost_us=200, episode_length=50)] * 2
    fns += [registered_fn("pararl/StepCost-v0", cost_us=5000, episode_length=50)] * 2
    venv = ParallelVectorEnv(fns, num_workers=2, worker_timeout=20.0)
    try:
        assert np.isnan(venv.reply_seconds).all()
        venv.reset(seed=0)
        venv.send(np.zeros(4, np.int64))
        venv.recv()
        fast, slow = venv.reply_seconds
        assert 0 < fast < slow
        assert slow >= 0.009  # two envs of 5 ms each
    finally:
        venv.close()
