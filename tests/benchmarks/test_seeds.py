"""`python -m benchmarks seeds`: its pool runs commands two at a time with a log each,
its options are checked, and its table says what each way measured."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from benchmarks import seeds
from benchmarks.lib import harness as h
from pararl.errors import UsageError


def test_the_pool_runs_two_at_a_time_and_keeps_each_log(tmp_path: Path) -> None:
    sleep = "import time, sys; print('ran', sys.argv[-1]); time.sleep(0.6)"
    fail = "import sys; print('broken'); sys.exit(3)"
    commands = [
        [sys.executable, "-c", sleep, "--run-dir", str(tmp_path / f"r{i}")] for i in range(3)
    ]
    commands.append([sys.executable, "-c", fail, "--run-dir", str(tmp_path / "bad")])
    start = time.perf_counter()
    wall, failures = seeds._pool(commands, 2, tmp_path)
    assert wall == pytest.approx(time.perf_counter() - start, abs=0.5)
    assert 1.1 < wall < 3.0  # two at a time: three sleeps of 0.6 s take two turns
    assert failures == ["rc 3: broken"]
    assert (tmp_path / "r1.log").read_text().strip() == "ran " + str(tmp_path / "r1")


def test_bad_options_are_refused() -> None:
    with pytest.raises(UsageError, match="unknown"):
        seeds.resolve(seeds.Config(cases=("pong",)))
    with pytest.raises(UsageError, match="--agents"):
        seeds.resolve(seeds.Config(agents=1))
    with pytest.raises(UsageError, match="--mode: choose from auto, serial, sync, async"):
        seeds.resolve(seeds.Config(mode="fast"))
    with pytest.raises(UsageError, match="--ways: choose from batched, separate, single"):
        seeds.resolve(seeds.Config(ways=("batched", "alone")))
    with pytest.raises(UsageError, match="--ways: the batch always runs; add batched"):
        seeds.resolve(seeds.Config(ways=("separate",)))
    assert seeds.resolve(seeds.Config(quick=True)).cases == ("cartpole-ppo",)


def test_the_table_gives_rates_ratio_and_finals() -> None:
    way = seeds.Way(10.0, 4, 1_000, (1.0, 2.0, 3.0, 4.0))
    result = seeds.Result(
        "cartpole-ppo", way, seeds.Way(40.0, 4, 1_000, (1.0, 2.0)), seeds.Way(8.0, 1, 1_000, ()),
        {"batched": (2.5, 1.5, 3.5)}, 0.5,
    )  # fmt: skip
    report = seeds.report([result], h.Metadata("seeds", {}))
    table = report.blocks[0]
    assert "| cartpole-ppo | 4 | 1,000 | 10 | 40 | 8 | 400 | 100 | 4.00× | >= 3x |" in table
    assert "2.5 [1.5, 3.5]" in table
    assert report.key_ratios == "cartpole-ppo 4.00×"


def test_a_batch_alone_is_reported_beside_its_published_anchor() -> None:
    """`--ways batched` (the GPU row): no separate runs, so no ratio; the key ratio is
    the batch's own time, and the table names PQN's published one."""
    batch = seeds.Way(200.0, 32, 1_000_000, (5.0, 6.0))
    result = seeds.Result("breakout-ppo", batch, None, None, {}, None)
    report = seeds.report([result], h.Metadata("seeds", {}))
    assert "| breakout-ppo | 32 | 1,000,000 | 200 | – | – | 160k | – | –" in report.blocks[0]
    assert report.key_ratios == "breakout-ppo 32 agents in 200 s"
    assert "10 MinAtar seeds in under 5 minutes on one A40" in report.blocks[-1]


def test_the_floor_steps_the_batchs_envs_as_it_laid_them_out(tmp_path: Path) -> None:
    import json

    resolved = {"num_envs": 2, "seeds": [0, 1], "mode": "serial", "workers": 1}
    (tmp_path / "config.json").write_text(json.dumps({"env": "CartPole-v1", "resolved": resolved}))
    rate = seeds.envs_alone(tmp_path, steps=50)
    assert rate is not None
    assert rate > 0
    assert seeds.envs_alone(tmp_path / "missing") is None


def test_the_flop_count_is_the_hand_computed_dqn_step() -> None:
    """Per agent env step, DQN's defaults on CartPole: one forward of the 4-128-128-2
    Q-network to act, and a quarter of an update (replay ratio 0.25) of batch 64: the
    online network's forward and backward (3 forwards' worth) and the double-DQN target's
    two forwards on the next observations."""
    forward = 2 * (4 * 128 + 128 * 128 + 128 * 2)
    expected = forward + 0.25 * 64 * forward * (3 + 2)
    flops = seeds.flops_per_step("dqn", "CartPole-v1", 2, steps=256)
    assert flops == pytest.approx(expected, rel=0.05)


def test_the_floor_is_the_envs_alone_plus_the_flops_at_the_peak() -> None:
    way = seeds.Way(10.0, 4, 1_000, (1.0,))
    result = seeds.Result("cartpole-dqn", way, way, way, {}, None, envs_alone=2_000.0,
                          flops=1e6, peak=100.0)  # fmt: skip
    assert result.floor_s == pytest.approx(4_000 / 2_000 + 4_000 * 1e6 / 100e9)
    table = seeds.report([result], h.Metadata("seeds", {})).blocks[0]
    assert "| 2k | 1.00 | 2.0 | 4.90× |" in table
