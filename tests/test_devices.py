"""The start-up timings `--act-device auto` / `--learn-device auto` choose on."""

from __future__ import annotations

import time

import torch

from pararl.devices import _time_it


def test_a_few_slow_calls_do_not_sway_the_timing() -> None:
    """Two calls of twenty slowed 100× by other work (processes starting beside the
    timing, say) leave the timing at the usual call's, where a mean would grow 10×."""
    calls = iter(range(100))

    def call() -> None:
        time.sleep(0.1 if next(calls) in (3, 11) else 0.001)

    assert _time_it(call, torch.device("cpu"), repeats=20) < 0.005
