"""`pararl bench partial`: the quick run works end to end through the CLI and writes
what it promises; bad options exit with code 2 before anything starts."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import pytest

from pararl.cli import main


def test_quick_run_writes_json_and_png_but_not_benchmarks_md(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    md = tmp_path / "BENCHMARKS.md"
    children_before = set(mp.active_children())
    args = ["bench", "partial", "--quick", "--workers", "2", "--envs-per-worker", "4"]
    args += ["--recv", "all", "timeout=0.0001", "min_envs=0.5", "auto"]
    code = main([*args, "--out-dir", str(tmp_path), "--benchmarks-md", str(md)])
    assert code == 0
    assert not md.exists()
    assert (tmp_path / "bench_partial.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((tmp_path / "partial.json").read_text())
    assert data["benchmark"] == "partial"
    assert [c["hidden"] for c in data["cases"]] == [[64, 64], [256, 256]]
    for case in data["cases"]:
        assert case["num_envs"] == 8
        assert case["rss_per_env_mb"] > 0
        assert list(case["policies"]) == ["all", "timeout=0.0001", "min_envs=0.5", "auto"]
        for cell in case["policies"].values():
            assert cell["s_per_iteration"]["median"] > 0
            assert 1.0 <= cell["mean_workers_per_recv"] <= 2.0
            assert cell["forwards_per_iteration"] >= 1.0
        assert case["policies"]["all"]["forwards_per_iteration"] == pytest.approx(1.0, abs=0.03)
        assert case["policies"]["auto"]["auto"]["step_cv"] is not None
    assert "auto / best fixed policy" in data["key_ratios"]
    assert set(mp.active_children()) <= children_before
    assert "| envs/worker | envs | L | recv |" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args",
    [
        ["--recv", "sometimes"],
        ["--hidden", "64,x"],
        ["--envs-per-worker", "0"],
        ["--repeats", "0"],
    ],
)
def test_bad_options_exit_with_code_2(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "partial", "--quick", "--out-dir", str(tmp_path), *args]) == 2
    assert "pararl: error:" in capsys.readouterr().err
    assert not (tmp_path / "partial.json").exists()
