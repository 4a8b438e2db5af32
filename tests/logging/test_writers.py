"""metrics.csv: the run's columns and no other (an unknown metric is an error, never
dropped), and a resumed run's file keeps its header, widened where it lacks one."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pararl.logging.writers import MetricsWriter, UnknownMetricError, truncate_after


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open() as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def test_an_unknown_metric_is_an_error(tmp_path: Path) -> None:
    metrics = MetricsWriter(tmp_path / "m.csv", None, ("env_steps", "loss"))
    metrics.write({"env_steps": 1, "loss": 0.5})
    with pytest.raises(UnknownMetricError, match="q_mean"):
        metrics.write({"env_steps": 2, "q_mean": 3.0})
    metrics.close()
    assert _rows(tmp_path / "m.csv") == (["env_steps", "loss"], [{"env_steps": "1", "loss": "0.5"}])


def test_an_older_header_is_kept_and_widened(tmp_path: Path) -> None:
    """A run written with other columns (an earlier version's wider set, in another
    order): appended rows follow its header; a column it lacks is added to it."""
    path = tmp_path / "m.csv"
    path.write_text("env_steps,epsilon,pg_loss,loss\n10,0.5,,1.5\n")
    metrics = MetricsWriter(path, None, ("env_steps", "loss", "q_mean"))
    metrics.write({"env_steps": 20, "loss": 2.5, "q_mean": 7.0})
    metrics.close()
    header, rows = _rows(path)
    assert header == ["env_steps", "epsilon", "pg_loss", "loss", "q_mean"]
    assert rows[0] == {
        "env_steps": "10",
        "epsilon": "0.5",
        "pg_loss": "",
        "loss": "1.5",
        "q_mean": "",
    }
    assert rows[1] == {
        "env_steps": "20",
        "epsilon": "",
        "pg_loss": "",
        "loss": "2.5",
        "q_mean": "7.0",
    }


def test_truncate_drops_the_rows_past_a_step_only(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("env_steps,loss\n10,1\n20,2\n30,3\n")
    truncate_after(path, 20)
    assert [r["env_steps"] for r in _rows(path)[1]] == ["10", "20"]
    before = path.stat().st_mtime_ns
    truncate_after(path, 20)  # nothing past: the file is left alone
    assert path.stat().st_mtime_ns == before
