"""`pararl bench ppo` and `pararl bench devices`: the quick paths end to end through
the CLI (shrunk further), the solve harness with `algo="ppo"`, the SB3 PPO anchor's
settings, the devices harness on fake training processes (GPU rows included, which
this machine cannot run for real), and double-buffering reported as missing."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import sys
from pathlib import Path
from typing import Any

import pytest

from pararl.bench import devices, dqn_solve, ppo_sampling, sb3_ppo
from pararl.bench.devices_report import tables as devices_tables
from pararl.bench.dqn_solve import SolveSettings, parse_sb3, train_command, verify_command
from pararl.bench.ppo_report import sampling_table
from pararl.bench.ppo_sampling import SamplingSettings
from pararl.bench.sb3_runner import result_prefix
from pararl.cli import main


@pytest.fixture
def no_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip the untimed import warm-up process (seconds) in the harnesses."""
    monkeypatch.setattr(dqn_solve, "warm_up", lambda workdir: None)
    monkeypatch.setattr(devices, "warm_up", lambda workdir: None)


def test_solve_harness_builds_ppo_commands(tmp_path: Path) -> None:
    s = SolveSettings(budget=1_000, eval_every=500, algo="ppo")
    pararl = train_command("pararl", 3, tmp_path, s)
    assert pararl[2:6] == ["pararl.cli", "train", "ppo", "--env"]
    assert "--mode" not in pararl  # `pararl` = the defaults
    assert pararl[pararl.index("--eval-every") + 1] == "500"
    assert "--mode" in train_command("pararl-serial", 3, tmp_path, s)
    sb3 = train_command("sb3", 3, tmp_path, s)
    assert sb3[2] == "pararl.bench.sb3_ppo"
    assert verify_command("sb3", tmp_path, s)[2] == "pararl.bench.sb3_ppo"
    assert verify_command("pararl", tmp_path, s)[3] == "evaluate"
    assert train_command("sb3", 3, tmp_path, SolveSettings())[2] == "pararl.bench.sb3_dqn"
    out = 'sb3-dqn: {"mean": 1.0}\nsb3-ppo: {"mean": 2.0}\n'
    assert parse_sb3(out, result_prefix("ppo")) == {"mean": 2.0}
    assert parse_sb3(out) == {"mean": 1.0}  # the DQN anchor's, as before


def test_sb3_ppo_uses_the_zoo_settings() -> None:
    hp = sb3_ppo.hyperparameters()
    assert sb3_ppo.ZOO_N_ENVS == 8
    assert {k: hp[k] for k in ("n_steps", "batch_size", "n_epochs", "gamma")} == {
        "n_steps": 32,
        "batch_size": 256,
        "n_epochs": 20,
        "gamma": 0.98,
    }
    assert (hp["gae_lambda"], hp["ent_coef"]) == (0.8, 0.0)
    assert hp["learning_rate"](1.0) == pytest.approx(1e-3)
    assert hp["learning_rate"](0.25) == pytest.approx(2.5e-4)
    assert hp["clip_range"](0.5) == pytest.approx(0.1)


FAKE_TRAIN = """
import json, sys, time
from pathlib import Path
out, placement, act, learn, sleep = sys.argv[1:]
time.sleep(float(sleep))
if placement == "cpu-act-gpu-learn":
    sys.stderr.write("RuntimeError: CUDA out of memory\\n")
    sys.exit(1)
Path(out).mkdir(parents=True)
devices = {"act": act, "learn": learn, "reason": "fastest measured",
           "timings_ms": {"forward_cpu": 0.1, "forward_cuda": 0.3}}
resolved = {"mode": "sync", "num_envs": 8, "learner_threads": 1, "devices": devices}
Path(out, "config.json").write_text(json.dumps({"algo": "PPOConfig", "resolved": resolved}))
sys.stderr.write("pararl: step budget reached after 2,048 env steps in 0.1 s (best eval 9.0)\\n")
"""


def test_devices_harness_on_fake_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_warm_up: None
) -> None:
    """GPU rows with CUDA: a failing placement is reported and not run again; ratios
    to CPU-only, the fastest placement and auto's pick come out of the runs."""
    sleeps = {"cpu-only": 0.05, "gpu-only": 0.4, "cpu-act-gpu-learn": 0.0, "auto": 0.05}

    def fake(config: Any, width: int, placement: str, out: Path) -> list[str]:
        act, learn = {"auto": ("cpu", "cpu")}.get(placement, devices.DEVICES[placement])
        args = [str(out), placement, act, learn, str(sleeps[placement])]
        return [sys.executable, "-c", FAKE_TRAIN, *args]

    monkeypatch.setattr(devices, "train_command", fake)
    config = devices.resolve(devices.DevicesBenchConfig(widths=(64,), repeats=2))
    data = devices.measure(config, cuda=True)
    (width,) = data["widths"]
    cells = width["placements"]
    assert cells["cpu-only"]["ok"] == 2
    assert cells["gpu-only"]["ratio_to_cpu"] > 1.5
    assert cells["cpu-act-gpu-learn"]["runs"] == 1  # failed once, then dropped
    assert "out of memory" in cells["cpu-act-gpu-learn"]["note"]
    assert width["fastest"] == "cpu-only"
    assert cells["auto"]["picked"] == {"act": "cpu", "learn": "cpu"}
    assert cells["auto"]["timings_ms"]["forward_cuda"] == 0.3

    data["metadata"] = {"params": dataclasses.asdict(config), "gpu": "fake GPU"}
    text = "\n".join(devices_tables(data))
    assert "CPU only ★" in text
    assert "failed (rc 1: RuntimeError: CUDA out of memory)" in text
    without = devices.measure(config, cuda=False)
    assert without["widths"][0]["placements"]["gpu-only"]["status"] == devices.NO_CUDA


def test_double_buffer_missing_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    from pararl.runners.ppo import collect

    monkeypatch.setattr(ppo_sampling, "collectors", lambda: {"single": collect, "double": None})
    s = SamplingSettings(
        envs=("CartPole-v1",),
        policies=((8,),),
        envs_per_worker=2,
        num_steps=4,
        rollouts=1,
        warmup=0,
        repeats=1,
    )
    (case,) = ppo_sampling.measure_sampling(s)
    assert case["variants"]["single"]["steps_per_s"]["median"] > 0
    assert case["variants"]["double"]["status"] == "not available"
    assert case["double_over_single"] is None
    assert "not available" in sampling_table([case], dataclasses.asdict(s))


def _tiny_md(tmp_path: Path) -> list[str]:
    return ["--out-dir", str(tmp_path), "--benchmarks-md", str(tmp_path / "BENCHMARKS.md")]


def test_bench_ppo_quick_end_to_end(tmp_path: Path, no_warm_up: None) -> None:
    before = {p.pid for p in mp.active_children()}
    code = main(
        [
            *("bench", "ppo", "--quick", "--budget", "512", "--eval-every", "256"),
            *("--envs", "pararl/StepCost-v0", "--expensive-hidden", "256", "256"),
            *("--rollouts", "1", "--repeats", "1", *_tiny_md(tmp_path)),
        ]
    )
    assert code == 0
    assert {p.pid for p in mp.active_children()} <= before
    assert not (tmp_path / "BENCHMARKS.md").exists()  # --quick leaves it alone
    data = json.loads((tmp_path / "ppo.json").read_text())
    runs = {r["system"]: r for r in data["solve"]["runs"]}
    assert set(runs) == {"pararl", "sb3"}
    for run in runs.values():
        assert run["returncode"] == 0, run["note"]
        assert run["env_steps"] >= 256
        assert run["verify_mean"] is not None  # the check ran and was read
    assert set(data["solve"]["ratio_to_sb3"]) == {"pararl"}
    cases = data["double_buffer"]
    assert [c["hidden"] for c in cases] == [[64, 64], [256, 256]]
    for case in cases:
        assert case["variants"]["single"]["steps_per_s"]["median"] > 0
        assert case["variants"]["double"]["status"] in ("ok", "not available")
    assert (tmp_path / "bench_ppo.png").read_bytes()[:4] == b"\x89PNG"


def test_bench_devices_quick_end_to_end(tmp_path: Path, no_warm_up: None) -> None:
    md = tmp_path / "BENCHMARKS.md"
    code = main(
        [
            *("bench", "devices", "--quick", "--widths", "64", "--total-steps", "512"),
            *_tiny_md(tmp_path),
            *("--update-benchmarks", "True"),
        ]
    )
    assert code == 0
    data = json.loads((tmp_path / "devices.json").read_text())
    cells = data["widths"][0]["placements"]
    assert cells["cpu-only"]["status"] == "ok"
    assert cells["cpu-only"]["startup_s"]["median"] > 0
    assert cells["auto"]["picked"]["act"] in ("cpu", "cuda")
    if not data["cuda"]:
        assert cells["gpu-only"]["status"] == "no CUDA"
    assert (tmp_path / "bench_devices.png").is_file()
    text = md.read_text()
    assert "<!-- bench:devices:start -->" in text
    assert "pararl bench devices --quick" in text


def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "ppo", "--workers", "1"]) == 2
    assert "--workers" in capsys.readouterr().err
    assert main(["bench", "devices", "--widths", "0"]) == 2
    assert main(["bench", "devices", "--repeats", "0"]) == 2
