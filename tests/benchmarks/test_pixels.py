"""`python -m benchmarks pixels`: the MinAtar part's quick path end to end on real
processes (pararl and SB3 PPO on Breakout), the SB3 anchor's settings and network
against pararl's, and the report's arithmetic on made-up runs."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tyro
from benchmarks.__main__ import main
from benchmarks.lib.compare import Outcome, Run, time_to_reach
from benchmarks.lib.harness import Metadata
from benchmarks.pixels import Slice, window_rate

from benchmarks import pixels
from benchmarks.lib import compare
from pararl.config import DQNConfig

pytest.importorskip("minatar")
pytest.importorskip("stable_baselines3")


def test_quick_minatar_runs_pararl_and_sb3(
    bench: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    args = ("--parts", "minatar", "--systems", "pararl-ppo", "sb3-ppo")
    data = bench(
        "pixels", "--quick", *args, "--budget", "1024", "--eval-every", "512", figure=False
    )
    runs = data["results"]["minatar"]["runs"]
    assert [r["system"] for r in runs] == ["pararl-ppo", "sb3-ppo"]
    for run in runs:
        assert run["ok"], run["note"]
        assert run["env_steps"] >= 1024
        # MinAtar's PPO: 4 epochs of 256-sample minibatches over every rollout of 8 envs
        # x 128 steps, each minibatch step counted
        assert run["updates"] == 4 * run["env_steps"] // 256
        walls = [p["wall_s"] for p in run["curve"]]
        assert walls == sorted(walls)
        assert 0 < walls[-1] <= run["wall_s"]  # on the launch-to-exit clock
    assert "Breakout pararl PPO: final" in data["key_ratios"]
    assert "vs SB3 PPO" in data["key_ratios"]


def test_sb3_gets_pararls_minatar_settings_and_network() -> None:
    import numpy as np
    import torch

    from benchmarks.lib import sb3
    from pararl.config import DQNConfig, PPOConfig
    from pararl.envs.make import make_env
    from pararl.images import ImageLayout
    from pararl.models.cnn import minatar_cnn

    dqn, s = sb3.minatar_dqn(50_000), DQNConfig.BY_KIND["minatar"]
    assert (dqn["learning_rate"], dqn["batch_size"], dqn["train_freq"]) == (s["lr"], 32, 1)
    assert dqn["target_update_interval"] == s["target_update"]
    assert dqn["exploration_fraction"] == s["eps_decay_steps"] / 50_000
    assert dqn["policy_kwargs"]["optimizer_kwargs"]["centered"]
    ppo, p = sb3.minatar_ppo(), PPOConfig.BY_KIND["minatar"]
    assert (ppo["n_steps"], ppo["batch_size"], ppo["n_epochs"]) == (128, 256, 4)
    assert (ppo["clip_range"], ppo["ent_coef"]) == (p["clip_coef"], p["ent_coef"])
    assert ppo["learning_rate"](0.5) == pytest.approx(p["lr"] / 2)  # annealed, as pararl's
    env = make_env("MinAtar/Breakout-v1", training=True)
    obs, _ = env.reset(seed=0)
    extractor = sb3.minatar_cnn()(env.observation_space)
    features = extractor(torch.as_tensor(np.stack([obs, obs])))
    assert features.shape == (2, 128)
    trunk = minatar_cnn(ImageLayout.of(obs.shape, obs.dtype))
    assert sum(q.numel() for q in extractor.parameters()) == sum(
        q.numel() for q in trunk.parameters()
    )


def curve(*points: tuple[float, float]) -> list[dict[str, float]]:
    return [
        {"env_steps": 1e3 * i, "wall_s": w, "eval_return": r} for i, (w, r) in enumerate(points)
    ]


def test_report_times_pararl_to_sb3s_final_return() -> None:
    env = "MinAtar/Breakout-v1"
    runs = [
        Run("pararl-dqn", env, 0, 50.0, True, 2_000, 10, curve((10, 1.0), (30, 6.0), (45, 7.0))),
        Run("sb3-dqn", env, 0, 100.0, True, 2_000, 10, curve((50, 2.0), (90, 5.0))),
        Run("pararl-dqn", env, 1, 50.0, True, 2_000, 10, curve((10, 1.0), (40, 5.0), (45, 5.0))),
        Run("sb3-dqn", env, 1, 80.0, True, 2_000, 10, curve((50, 2.0), (80, 5.0))),
        Run("pararl-dqn", env, 2, 50.0, True, 2_000, 10, curve((10, 1.0), (30, 2.0), (45, 3.0))),
        Run("sb3-dqn", env, 2, 100.0, True, 2_000, 10, curve((50, 2.0), (100, 5.0))),
        Run("pararl-ppo", env, 0, 30.0, True, 2_000, 10, curve((10, 4.0))),
    ]
    slices = [
        Slice("pararl-ppo", [(0.0, 0, 0), (1.0, 100, 1), (11.0, 3_100, 9)]),
        Slice("sb3-ppo", [(0.0, 0, 0), (2.0, 10, 1), (12.0, 1_010, 5)]),
    ]
    for piece in slices:
        piece.rate, piece.window_s, piece.updates_per_s = window_rate(piece.points, 10.0) or (
            0,
            0,
            0,
        )
    result = pixels.Result(Outcome("pixels", runs), slices)
    params = {"final_evals": 1, "budget": 2_000, "eval_every": 1_000, "keep_dir": None}
    params |= {"eval_episodes": 5, "slice_s": 10.0}
    params["learning_starts"] = 100
    report = pixels.report(result, Metadata("x", params))
    # each seed's SB3 run ends at 5.0 (after 100, 80 and 100 s); pararl reaches it at
    # 30 s (0.30), 40 s (0.50) and never: the medians are 40 s and 0.50
    assert (
        "Breakout pararl DQN (async): final 5.0 vs SB3 DQN 5.0, wall ÷ SB3 DQN 0.50×, "
        "SB3 DQN's final reached in 0.50× its wall time, 3 seed(s)" in report.key_ratios
    )
    assert "Pong pararl PPO agent steps/s ÷ SB3 zoo 3.00×" in report.key_ratios
    text = "\n".join(report.blocks)
    assert "| 2/3 |" in text
    assert "~17.5" in text  # the MinAtar paper's actor-critic on Breakout
    assert "Breakout pararl PPO: final 4.0, 1 seed(s)" in report.key_ratios  # no SB3 PPO run
    assert len(report.panels) == 2


def sf_report(time: str, samples: int, lag: float) -> str:
    """A report line as Sample Factory logs it."""
    return (f"[2026-11-29 {time}][00100] Fps is (10 sec: 800.0, 60 sec: 800.0, 300 sec: "
            f"800.0). Total num frames: {4 * samples}. Throughput: 0: 200.0. Samples: "
            f"{samples}. Policy #0 lag: (min: {lag:.1f}, avg: 0.4, max: 1.0)\n")  # fmt: skip


def test_sample_factorys_reports_give_agent_steps_from_its_first_update() -> None:
    from benchmarks.lib import sf_anchor as sample_factory

    log = sf_report("21:14:00,000", 1024, -1.0) + "\x1b[36m" + sf_report("21:14:05,000", 3072, 0.0)
    log += "[2026-11-29 21:14:05,500][00100] Avg episode reward: [(0, '-21.000')]\n"
    points = sample_factory.points(log + sf_report("21:14:15,000", 7168, 0.0))
    assert points == [(0.0, 1024, 0), (5.0, 3072, 1), (15.0, 7168, 1)]
    # the window opens at the first report after an update: 4,096 agent steps in 10 s
    assert window_rate(points, 10.0)[:2] == (409.6, 10.0)  # type: ignore[index]
    slices = [Slice("pararl-ppo-async", rate=819.2), Slice("sf-appo", rate=409.6)]
    assert pixels.vs_anchor(slices[0], slices, "sf") == pytest.approx(2.0)
    result = pixels.Result(None, slices)
    params = {"slice_s": 10.0, "learning_starts": 100}
    assert (
        "÷ Sample Factory APPO 2.00× (target ≥ 2)"
        in pixels.report(result, Metadata("x", params)).key_ratios
    )


def test_sample_factory_without_its_environment_is_a_note_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.lib import sf_anchor as sample_factory

    monkeypatch.setattr(sample_factory, "VENV", tmp_path / "absent")
    c = pixels.resolve(pixels.Config(quick=True, parts=("pong",), pong_systems=("sf-appo",)))
    piece = pixels.pong_slice("sf-appo", c, tmp_path)
    assert piece.rate is None
    assert "make venv-sf" in piece.note


def test_time_to_reach_and_window_rate_edges() -> None:
    run = Run("pararl-dqn", "MinAtar/Breakout-v1", 0, 9.0, True, curve=curve((1, 0.0), (2, 3.0)))
    assert time_to_reach(run, 3.0) == 2
    assert math.isinf(time_to_reach(run, 3.5))
    # ten episodes of 1.0 averaged one way, against 1.0 averaged another
    rounded = Run("pararl-ppo", "pararl/RepeatPrevious-v0", 0, 9.0, True,
                  curve=curve((1, 0.5), (2, 0.9999999999999998)))  # fmt: skip
    assert time_to_reach(rounded, 1.0) == 2
    assert math.isinf(time_to_reach(rounded, 1.0 + 1e-6))
    assert window_rate([(0.0, 10, 0), (1.0, 20, 0)], 5.0) is None  # never learned
    # points past the slice are left out
    assert window_rate([(1.0, 0, 1), (3.0, 200, 3), (9.0, 900, 9)], 2.0) == (100.0, 2.0, 1.0)


def test_bad_options_are_refused() -> None:
    assert main(["pixels", "--runs", "ALE/Pong-v5:0"]) == 2
    assert main(["pixels", "--budget", "0"]) == 2
    assert main(["pixels", "--parts", "pong", "--slice-s", "0"]) == 2


def test_the_dqn_system_is_async_with_its_minatar_defaults(tmp_path: Path) -> None:
    c = pixels.resolve(pixels.Config())
    env = "MinAtar/SpaceInvaders-v1"
    cmd = compare.pararl_command(pixels.ROW, c, pixels.ROW.system("pararl-dqn"), env, 3, tmp_path)
    assert cmd[3:5] == ["train", "dqn"]
    config = tyro.cli(DQNConfig, args=cmd[5:])
    assert (config.mode, config.workers, config.envs_per_worker) == ("async", None, 4)
    assert config.acting_lag == 0
    assert (config.seed, config.prioritized, config.sync_every) == (3, False, 16)
