"""The three waits of `Commands` on a scripted transport and a fake clock: which
replies each returns, and that each keeps its bounds (the caller's timeout, the
worker timeout, a dead worker reported by index)."""

from __future__ import annotations

import math
import multiprocessing as mp
from collections import deque
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pararl.vector import WorkerError, WorkerTimeoutError, inflight
from pararl.vector.inflight import Commands

HANG = math.inf
WAITS: dict[str, Callable[[Commands], object]] = {  # each waits for every env here
    "all": lambda commands: commands.wait_all(5.0, "step_wait"),
    "envs": lambda commands: commands.wait_envs(5.0, min_envs=6),
    "window": lambda commands: commands.wait_window(5.0, window=30.0),
}


class Scripted:
    """Workers of two envs each; worker w answers `delays[w]` seconds after a
    command (HANG: never), or dies if w is in `dead`. `ready` moves the clock on
    as a poll would: to the first reply, or by the whole timeout."""

    def __init__(self, delays: Sequence[float], dead: Sequence[int] = ()) -> None:
        self.now = 100.0
        self.delays, self.dead = list(delays), set(dead)
        self.slices = [range(2 * w, 2 * w + 2) for w in range(len(delays))]
        self.arrays: dict[str, np.ndarray] = {}
        self.due: list[deque[float]] = [deque() for _ in delays]

    def submit(self, worker: int, command: str, data: Any) -> None:
        self.due[worker].append(self.now + self.delays[worker])

    def ready(self, workers: Sequence[int], timeout: float | None) -> list[int]:
        for w in workers:
            if w in self.dead:
                raise WorkerError(w, "died", remote_traceback="Traceback: boom")
        first = min(self.due[w][0] for w in workers)
        if timeout is None:
            assert first < HANG, "a wait with no bound on a hung worker"
        limit = self.now + (HANG if timeout is None else timeout)
        self.now = min(max(first, self.now), limit)
        return [w for w in workers if self.due[w][0] <= self.now]

    def receive(self, worker: int) -> Any:
        self.due[worker].popleft()
        return f"from {worker}"

    def timeout_error(self, worker: int, message: str) -> WorkerTimeoutError:
        return WorkerTimeoutError(worker, message)

    def close(self, grace: float) -> None:
        pass


def started(
    monkeypatch: pytest.MonkeyPatch, delays: Sequence[float], dead: Sequence[int] = ()
) -> tuple[Commands, Scripted]:
    transport = Scripted(delays, dead)
    monkeypatch.setattr(inflight, "time", SimpleNamespace(monotonic=lambda: transport.now))
    commands = Commands(transport, 2 * len(delays))
    commands.submit("step", np.arange(2 * len(delays)), lambda local, rows: None)
    return commands, transport


def workers(replies: list[inflight.Reply]) -> list[str]:
    return sorted(payload for _, payload in replies)


def test_wait_all_takes_every_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    commands, clock = started(monkeypatch, [1.0, 3.0, 2.0])
    assert workers(commands.wait_all(5.0, "step_wait")) == ["from 0", "from 1", "from 2"]
    assert clock.now == 103.0
    assert not commands.in_flight.any()
    np.testing.assert_array_equal(commands.reply_seconds, [1.0, 3.0, 2.0])


def test_wait_all_times_out_with_the_call_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    commands, clock = started(monkeypatch, [1.0, 3.0])
    with pytest.raises(mp.TimeoutError, match=r"`step_wait` has timed out after 2\.0"):
        commands.wait_all(10.0, "step_wait", timeout=2.0)
    assert clock.now == 102.0
    # The reply that came is kept; waiting again collects the rest.
    assert workers(commands.wait_all(10.0, "step_wait")) == ["from 0", "from 1"]


def test_wait_envs_returns_once_enough_envs_are_back(monkeypatch: pytest.MonkeyPatch) -> None:
    commands, clock = started(monkeypatch, [1.0, 2.0, 3.0])
    assert workers(commands.wait_envs(10.0, min_envs=3)) == ["from 0", "from 1"]
    assert clock.now == 102.0
    assert commands.in_flight.tolist() == [False] * 4 + [True] * 2
    assert workers(commands.wait_envs(10.0, min_envs=3)) == ["from 2"]


def test_wait_window_takes_what_arrives_after_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    commands, clock = started(monkeypatch, [1.0, 1.25, 3.0])
    assert workers(commands.wait_window(10.0, window=0.5)) == ["from 0", "from 1"]
    assert clock.now == 101.5  # the window ran out from the first reply
    assert workers(commands.wait_window(10.0, window=0.5)) == ["from 2"]


def test_wait_window_ends_sooner_with_min_envs(monkeypatch: pytest.MonkeyPatch) -> None:
    commands, clock = started(monkeypatch, [1.0, 1.25, 3.0])
    assert workers(commands.wait_window(10.0, window=0.5, min_envs=2)) == ["from 0"]
    assert clock.now == 101.0


@pytest.mark.parametrize("wait", list(WAITS))
def test_every_wait_catches_a_hung_worker_while_others_reply(
    monkeypatch: pytest.MonkeyPatch, wait: str
) -> None:
    commands, clock = started(monkeypatch, [1.0, HANG, 2.0])
    with pytest.raises(WorkerTimeoutError) as caught:
        WAITS[wait](commands)
    assert caught.value.worker == 1
    assert clock.now == 105.0


@pytest.mark.parametrize("wait", list(WAITS))
def test_every_wait_reports_a_dead_worker_with_its_traceback(
    monkeypatch: pytest.MonkeyPatch, wait: str
) -> None:
    commands, _ = started(monkeypatch, [1.0, 1.0], dead=[1])
    with pytest.raises(WorkerError) as caught:
        WAITS[wait](commands)
    assert caught.value.worker == 1
    assert caught.value.remote_traceback == "Traceback: boom"
