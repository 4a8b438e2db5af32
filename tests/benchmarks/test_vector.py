"""`python -m benchmarks vector`: the quick run end to end (every backend, JSON, PNG,
tables), anchors skipped above the process cap, a missing simulator skipped with a
note, and bad options exiting with code 2 before anything starts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from benchmarks.__main__ import main

from benchmarks import vector
from tests.benchmarks.conftest import PNG


@pytest.mark.slow
def test_quick_run_measures_every_backend(
    bench: Callable[..., dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two workers: 8 envs at 4 per worker, so no anchor is skipped on any machine; one
    # env, the one with options of its own (every env takes the same backends' paths);
    # one envs-per-worker setting (each cell starts and stops its backend's processes)
    args = ("--workers", "2", "--envs-per-worker", "4", "--block-s", "0.05")
    data = bench("vector", "--quick", *args, "--envs", "pararl/StepCost-v0")
    assert not (tmp_path / "BENCHMARKS.md").exists()  # --quick leaves it alone
    assert (tmp_path / "bench_vector.png").read_bytes()[:8] == PNG
    assert data["metadata"]["params"]["workers_resolved"] == 2
    results = {r["env_id"]: r for r in data["results"]}
    assert set(results) == {"pararl/StepCost-v0"}
    assert results["pararl/StepCost-v0"]["env_kwargs"] == {"cost_us": 20.0, "tail_alpha": 1.5}
    for result in results.values():
        assert result["skipped"] is None
        asyncs = [c for c in result["cells"] if c["backend"] == "gym_async"]
        best = max(asyncs, key=lambda c: c["rate"]["median"])
        assert result["best_async"] == [best["rate"]["median"], best["envs_per_worker"]]
        assert [c["envs_per_worker"] for c in result["cells"]] == [4] * 8
        assert [c["backend"] for c in result["cells"][:8]] == list(vector.BACKENDS)
        for cell in result["cells"]:
            assert cell["status"] == "ok", cell
            assert 0 < cell["rate"]["min"] <= cell["rate"]["median"] <= cell["rate"]["max"]
            assert len(cell["rate"]["samples"]) == 2
            vs = cell["rate"]["median"] / result["best_async"][0]
            assert cell["vs_best_async"] == pytest.approx(vs)
    loops = results["pararl/StepCost-v0"]["cells"][1]
    assert loops["backend"] == "loops"
    assert loops["of_loops"] == pytest.approx(1.0)
    out = capsys.readouterr().out
    assert "| envs/worker | envs | backend | steps/s (median) |" in out
    assert "pararl recv(min_envs=epw)" in out
    assert "one plain loop per worker, no IPC" in out


def test_process_per_env_anchors_are_skipped_above_the_cap(
    bench: Callable[..., dict[str, Any]],
) -> None:
    args = ["--workers", "1", "--envs", "CartPole-v1", "--envs-per-worker", "2"]
    args += ["--backends", "single", "gym_async", "pararl_step", "--max-process-per-env", "1"]
    data = bench("vector", "--quick", "--block-s", "0.05", *args)
    cells = {c["backend"]: c for c in data["results"][0]["cells"]}
    assert (cells["gym_async"]["status"], cells["gym_async"]["note"]) == ("skipped", "2 processes")
    assert cells["pararl_step"]["status"] == "ok"
    assert cells["pararl_step"]["vs_best_async"] is None  # no Async measured


def test_env_without_its_simulator_is_skipped_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_mujoco(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
        raise gym.error.DependencyNotInstalled("MuJoCo is not installed")

    monkeypatch.setattr(vector, "make_env", no_mujoco)
    reason = vector.probe_env("HalfCheetah-v5", {})
    assert reason is not None
    assert "MuJoCo is not installed" in reason
    result = vector.EnvResult("HalfCheetah-v5", {}, 2, reason)
    assert "skipped: " in vector.env_block(result)


@pytest.mark.parametrize(
    "args",
    [
        ["--repeats", "0"],
        ["--envs-per-worker", "0"],
        ["--tail-alpha", "0.5"],
        ["--timeout-s", "0"],
        ["--envs", "NoSuchEnv-v0"],
    ],
)
def test_bad_options_exit_with_code_2(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["vector", "--quick", "--out-dir", str(tmp_path), *args]) == 2
    assert "benchmarks: error:" in capsys.readouterr().err
    assert not (tmp_path / "vector.json").exists()
