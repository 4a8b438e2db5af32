"""`pararl bench vector`: the quick benchmark runs end to end through the CLI and
writes what it promises; bad options exit with code 2 before anything starts;
the shared helpers (tables, BENCHMARKS.md sections, the reproducing command) hold."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import gymnasium as gym
import pytest

from pararl.bench import vector
from pararl.bench.common import (
    command_line,
    markdown_table,
    replace_section,
    section_markers,
    summarize,
)
from pararl.bench.vector import VectorBenchConfig
from pararl.bench.vector_backends import ALL_BACKENDS
from pararl.bench.vector_report import env_table
from pararl.cli import main

META_KEYS = {
    "command",
    "date",
    "git_commit",
    "cpu_count",
    "affinity_cpus",
    "physical_cores",
    "python",
    "versions",
    "params",
}


def _check_cell(cell: dict) -> None:
    assert cell["status"] == "ok", cell
    rate = cell["steps_per_s"]
    assert 0 < rate["min"] <= rate["median"] <= rate["max"]
    assert len(rate["samples"]) == 2
    assert cell["steps_per_block"] > 0
    assert cell["ratio_to_best_async"] > 0
    assert cell["efficiency"] > 0
    assert cell["of_loops"] > 0


def test_quick_run_writes_json_and_png_but_not_benchmarks_md(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    md = tmp_path / "BENCHMARKS.md"
    children_before = set(mp.active_children())
    # Two workers: 32 envs at 16 per worker, so no anchor is skipped on any machine.
    code = main(
        [
            "bench",
            "vector",
            "--quick",
            "--workers",
            "2",
            "--out-dir",
            str(tmp_path),
            "--benchmarks-md",
            str(md),
        ]
    )
    assert code == 0
    assert not md.exists()  # --quick leaves BENCHMARKS.md alone
    assert (tmp_path / "bench_vector.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    data = json.loads((tmp_path / "vector.json").read_text())
    assert data["benchmark"] == "vector"
    assert set(data["metadata"]) >= META_KEYS
    assert data["metadata"]["params"]["workers_resolved"] == 2
    results = {r["env_id"]: r for r in data["results"]}
    assert set(results) == {"CartPole-v1", "pararl/StepCost-v0"}
    for result in results.values():
        assert result["skipped"] is None
        assert result["best_async"]["steps_per_s"] > 0
        assert [c["envs_per_worker"] for c in result["cases"]] == [1, 16]
        for case in result["cases"]:
            assert [c["backend"] for c in case["results"]] == list(ALL_BACKENDS)
            for cell in case["results"]:
                _check_cell(cell)
    assert set(mp.active_children()) <= children_before  # every backend's workers are gone

    out = capsys.readouterr().out
    assert "### CartPole-v1" in out
    assert "| envs/worker | envs | backend |" in out
    assert "pararl recv(min_envs=epw)" in out
    assert "one plain loop per worker, no IPC" in out
    loops = next(
        c for c in results["CartPole-v1"]["cases"][0]["results"] if c["backend"] == "loops"
    )
    assert loops["of_loops"] == pytest.approx(1.0)


def test_process_per_env_anchors_are_skipped_above_the_cap(tmp_path: Path) -> None:
    code = main(
        [
            "bench",
            "vector",
            "--quick",
            "--workers",
            "1",
            "--envs",
            "CartPole-v1",
            "--envs-per-worker",
            "2",
            "--backends",
            "single",
            "gym_async",
            "pararl_step",
            "--max-process-per-env",
            "1",
            "--out-dir",
            str(tmp_path),
        ]
    )
    assert code == 0
    case = json.loads((tmp_path / "vector.json").read_text())["results"][0]["cases"][0]
    cells = {c["backend"]: c for c in case["results"]}
    assert cells["gym_async"]["status"] == "skipped"
    assert cells["gym_async"]["note"] == "2 processes"
    assert cells["pararl_step"]["status"] == "ok"
    assert cells["pararl_step"]["ratio_to_best_async"] is None  # no Async measured


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
    assert main(["bench", "vector", "--quick", "--out-dir", str(tmp_path), *args]) == 2
    assert "pararl: error:" in capsys.readouterr().err
    assert not (tmp_path / "vector.json").exists()


def test_replace_section_creates_replaces_and_appends(tmp_path: Path) -> None:
    path = tmp_path / "B.md"
    replace_section(path, "vector", "first", intro="# intro\n")
    replace_section(path, "dqn", "other")
    replace_section(path, "vector", "second")
    text = path.read_text()
    start, end = section_markers("vector")
    assert text.startswith("# intro\n")
    assert f"{start}\nsecond\n{end}" in text
    assert "first" not in text
    assert text.index(start) < text.index(section_markers("dqn")[0])  # replaced in place


def test_replace_section_refuses_unmatched_markers(tmp_path: Path) -> None:
    path = tmp_path / "B.md"
    path.write_text(f"# x\n{section_markers('vector')[0]}\nold\n")
    with pytest.raises(ValueError, match="unmatched"):
        replace_section(path, "vector", "new")


def test_helpers() -> None:
    assert markdown_table(["a", "b"], [[1, "x|y"]], "lr") == "| a | b |\n|:--|--:|\n| 1 | x\\|y |"
    summary = summarize([3.0, 1.0, 2.0])
    assert (summary.median, summary.min, summary.max) == (2.0, 1.0, 3.0)
    config = VectorBenchConfig(
        quick=True, envs_per_worker=(1, 8), out_dir=Path("out"), update_benchmarks=True
    )
    assert command_line("pararl bench vector", config) == (
        "pararl bench vector --quick --envs-per-worker 1 8 --out-dir out --update-benchmarks True"
    )


def test_env_without_its_simulator_is_skipped_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_mujoco(env_id: str, kwargs: dict) -> None:
        raise gym.error.DependencyNotInstalled("MuJoCo is not installed")

    monkeypatch.setattr(vector, "make_env", no_mujoco)
    reason = vector.probe_env("HalfCheetah-v5", {})
    result = vector.measure_env("HalfCheetah-v5", 2, VectorBenchConfig(), skipped=reason)
    assert result.skipped is not None
    assert "MuJoCo is not installed" in result.skipped
    assert not result.cases
    assert "skipped: " in env_table(result, 1e-3)
