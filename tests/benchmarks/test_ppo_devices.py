"""`python -m benchmarks ppo` and `devices`: the quick paths end to end (shrunk
further), and the devices harness on fake training processes (GPU rows included,
which this machine cannot run for real)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main
from benchmarks.lib.harness import Metadata

from benchmarks import devices
from benchmarks.lib import compare, training
from tests.benchmarks.conftest import PNG


@pytest.fixture
def no_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip the untimed import warm-up process (seconds) of the harnesses."""
    monkeypatch.setattr(training, "warm_up", lambda workdir: None)


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
Path(out, "config.json").write_text(json.dumps({"resolved": {"devices": devices}}))
sys.stderr.write("pararl: step budget reached after 2,048 env steps in 0.1 s (best eval 9.0)\\n")
"""


def test_devices_harness_on_fake_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_warm_up: None
) -> None:
    """With CUDA: a failing placement is reported and not run again; ratios to CPU-only,
    the fastest placement and auto's pick come out of the runs."""
    sleeps = {"cpu-only": 0.05, "gpu-only": 0.4, "cpu-act-gpu-learn": 0.0, "auto": 0.05}

    def fake(row: Any, c: Any, s: compare.System, env: str, seed: int, out: Path) -> list[str]:
        placement = s.name.split("-", 1)[1]
        act, learn, _ = {"auto": ("cpu", "cpu", "")}.get(placement, devices.DEVICES[placement])
        return [sys.executable, "-c", FAKE_TRAIN, str(out), placement, act, learn,
                str(sleeps[placement])]  # fmt: skip

    monkeypatch.setattr(compare, "pararl_command", fake)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.get_device_name", lambda i: "fake GPU")
    config = devices.resolve(devices.Config(widths=(64,), repeats=2))
    meta = Metadata("x", vars(config))
    result = devices.measure(config, meta)
    cells = {x.placement: x for x in result.cells}
    assert len(cells["cpu-only"].wall.samples) == 2
    assert cells["gpu-only"].vs_cpu > 1.5
    assert cells["cpu-act-gpu-learn"].runs == 1  # failed once, then dropped
    assert "out of memory" in cells["cpu-act-gpu-learn"].note
    assert [x.placement for x in result.cells if x.fastest] == ["cpu-only"]
    assert cells["auto"].picked == "act cpu, learn cpu"
    assert cells["auto"].timings_ms["forward_cuda"] == 0.3
    text = "\n".join(devices.report(result, meta).blocks)
    assert "CPU only ★" in text
    assert "GPU: fake GPU" in text
    assert "failed (rc 1: RuntimeError: CUDA out of memory)" in text


def test_ppo_quick_end_to_end(bench: Callable[..., dict[str, Any]], no_warm_up: None) -> None:
    data = bench(*("ppo", "--quick", "--budget", "512", "--eval-every", "256"), figure=False)
    runs = {r["system"]: r for r in data["results"]["runs"]}
    assert set(runs) == {"pararl", "sb3"}
    for run in runs.values():
        assert run["ok"], run["note"]
        assert run["env_steps"] >= 256
        # the check runs only after a run stopped on the target
        assert (run["check"] is not None) == (run["status"] == "solved")
    assert "CartPole pararl PPO (defaults): time to solve ÷ SB3 PPO (zoo)" in data["key_ratios"]


def test_devices_quick_end_to_end(
    bench: Callable[..., dict[str, Any]], tmp_path: Path, no_warm_up: None
) -> None:
    data = bench(
        *("devices", "--quick", "--widths", "64", "--total-steps", "512"),
        *("--update-benchmarks", "True"),
    )
    cells = {c["placement"]: c for c in data["results"]["cells"]}
    assert cells["cpu-only"]["status"] == "ok"
    assert cells["cpu-only"]["startup"]["median"] > 0
    assert cells["auto"]["picked"].startswith("act ")
    if not data["results"]["cuda"]:
        assert cells["gpu-only"]["status"] == "no CUDA"
    assert (tmp_path / "bench_devices.png").read_bytes()[:8] == PNG
    text = (tmp_path / "BENCHMARKS.md").read_text()
    assert "<!-- bench:devices:start -->" in text
    assert "python -m benchmarks devices --quick" in text


def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ppo", "--budget", "0"]) == 2
    assert main(["devices", "--widths", "0"]) == 2
    assert main(["devices", "--repeats", "0"]) == 2
