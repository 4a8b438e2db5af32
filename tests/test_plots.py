"""The learning curve: one run's lines, or a population's IQM with its bootstrap band
(each point over every agent, the band around it)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pararl import plots
from pararl.stats import iqm

PNG = b"\x89PNG\r\n\x1a\n"


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_a_population_draws_each_points_iqm_within_its_band(tmp_path: Path) -> None:
    returns = {100: [1.0, 2.0, 3.0, 10.0], 200: [5.0, 6.0, 7.0, 8.0]}
    rows = [
        {"agent": i, "env_steps": x, "wall_s": x / 10, "eval_return": r}
        for x, values in returns.items()
        for i, r in enumerate(values)
    ]
    rows.append({"agent": 0, "env_steps": 300, "wall_s": 30, "eval_return": 9.0})  # one agent
    str_rows = [{k: str(v) for k, v in row.items()} for row in rows]
    xs, mids, lows, highs = plots._bands(str_rows, "env_steps", "eval_return")
    assert xs == [100.0, 200.0]  # 300: not every agent got there
    assert mids == [pytest.approx(iqm(v)) for v in returns.values()] == [2.5, 6.5]
    assert all(lo <= m <= hi for lo, m, hi in zip(lows, mids, highs, strict=True))
    assert lows[0] < highs[0]
    eval_csv = write(tmp_path / "eval.csv", rows)
    out = plots.learning_curve(tmp_path / "none.csv", eval_csv, tmp_path / "c.png", "four agents")
    assert out is not None
    assert out.read_bytes().startswith(PNG)


def test_one_run_draws_its_lines(tmp_path: Path) -> None:
    rows = [{"env_steps": x, "wall_s": x / 10, "episode_return": x / 2} for x in (10, 20)]
    metrics = write(tmp_path / "metrics.csv", rows)
    out = plots.learning_curve(metrics, tmp_path / "no-eval.csv", tmp_path / "c.png", "one")
    assert out is not None
    assert plots.learning_curve(tmp_path / "a", tmp_path / "b", tmp_path / "n.png", "x") is None
