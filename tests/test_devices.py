"""The start-up timings `--act-device auto` / `--learn-device auto` choose on."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from pararl import devices
from pararl.devices import _time_it
from pararl.models import ActorCritic


def test_a_few_slow_calls_do_not_sway_the_timing() -> None:
    """Two calls of twenty slowed 100× by other work (processes starting beside the
    timing, say) leave the timing at the usual call's, where a mean would grow 10×."""
    calls = iter(range(100))

    def call() -> None:
        time.sleep(0.1 if next(calls) in (3, 11) else 0.001)

    assert _time_it(call, torch.device("cpu"), repeats=20) < 0.005


def test_the_cpu_is_timed_with_the_threads_the_run_will_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`auto` times the forward on the run's acting threads and the update on its
    update threads, and leaves torch's count as it found it."""
    seen: list[tuple[str, int]] = []

    class Probe(ActorCritic):
        def act_tensors(self, obs: torch.Tensor, deterministic: bool = False) -> Any:
            seen.append(("act", torch.get_num_threads()))
            return super().act_tensors(obs, deterministic)

        def value(self, obs: torch.Tensor) -> torch.Tensor:
            seen.append(("value", torch.get_num_threads()))
            return super().value(obs)

    cpu = torch.device("cpu")
    monkeypatch.setattr(devices, "available_devices", lambda: [cpu, cpu])  # two to choose from
    before, stream = torch.get_num_threads(), torch.get_rng_state()
    choice = devices.choose_devices(
        lambda: Probe(4, 2, True, (8,)), 4, 8, 32, "auto", "auto", act_threads=1, update_threads=2
    )
    assert choice.reason == "fastest measured"
    assert {n for kind, n in seen if kind == "act"} == {1}
    assert {n for kind, n in seen if kind == "value"} == {2}
    assert torch.get_num_threads() == before
    assert torch.equal(torch.get_rng_state(), stream)  # the run's stream untouched
