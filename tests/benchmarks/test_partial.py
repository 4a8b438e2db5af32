"""`python -m benchmarks partial`: the quick run end to end; bad options exit with
code 2 before anything starts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main

from tests.benchmarks.conftest import PNG


def test_quick_run(bench: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    recv = ["all", "timeout=0.0001", "min_envs=0.5", "auto"]
    args = ("--workers", "2", "--envs-per-worker", "4", "--hidden", "64,64", "--recv", *recv)
    data = bench("partial", "--quick", *args)
    assert (tmp_path / "bench_partial.png").read_bytes()[:8] == PNG
    rows = data["results"]
    assert [(r["hidden"], r["recv"]) for r in rows] == [([64, 64], r) for r in recv]
    for row in rows:
        assert row["num_envs"] == 8
        assert row["rss_per_env_mb"] > 0
        assert row["per_iteration"]["median"] > 0
        assert 1.0 <= row["workers_per_recv"] <= 2.0
        assert row["forwards_per_iteration"] >= 1.0
        assert row["step_cv"] is not None  # measured by auto, shown for the whole case
    assert rows[0]["forwards_per_iteration"] == pytest.approx(1.0, abs=0.03)  # wait for all
    assert rows[3]["auto"].startswith(("wait", "partial"))
    assert "auto / best fixed policy" in data["key_ratios"]


@pytest.mark.parametrize(
    "args",
    [["--recv", "sometimes"], ["--hidden", "64,x"], ["--envs-per-worker", "0"], ["--repeats", "0"]],
)
def test_bad_options_exit_with_code_2(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["partial", "--quick", "--out-dir", str(tmp_path), *args]) == 2
    assert "benchmarks: error:" in capsys.readouterr().err
    assert not (tmp_path / "partial.json").exists()
