"""`python -m benchmarks maml`: the quick run end to end (pararl's sampler and the
seed's design on the same meta-iterations); bad options exit with code 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main

from benchmarks import harness as h
from tests.benchmarks.conftest import PNG


def test_quick_run(bench: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    data = bench("maml", "--quick")
    assert (tmp_path / "bench_maml.png").read_bytes()[:8] == PNG
    rows = data["results"]["rows"]
    assert data["results"]["curves"] == []  # --quick leaves the meta-training runs out
    assert [r["design"] for r in rows] == ["pararl", "seed"]
    for row in rows:
        assert row["tasks"] == 4
        assert row["episodes"] == 4
        parts = [row[p]["median"] for p in ("sampling", "adaptation", "outer")]
        assert min(parts) > 0
        assert row["iteration"]["median"] == pytest.approx(sum(parts))
    assert rows[1]["vs_seed"] == 1.0
    assert "seed / pararl per meta-iteration" in data["key_ratios"]


@pytest.mark.parametrize("args", [["--workers", "0"], ["--iterations", "0"], ["--envs"]])
def test_bad_options_exit_with_code_2(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["maml", "--quick", "--out-dir", str(tmp_path), *args]) == 2
    assert "error" in capsys.readouterr().err
    assert not (tmp_path / "maml.json").exists()


def test_curves_are_read_from_a_real_run(tmp_path: Path) -> None:
    """The curves part on a short real `pararl train maml` run (its smallest case)."""
    from benchmarks import maml_curves

    curve = maml_curves.run_curve("pararl/Navigation2D-v0", 1, 0, 1, 120.0, tmp_path)
    assert curve.ok, curve.note
    assert [p["iteration"] for p in curve.points] == [1.0]
    assert curve.points[0]["post"] > curve.points[0]["pre"]  # one step on 20 tasks helps
    table = h.table(maml_curves.COLUMNS, [curve])
    assert "1 / 1" in table
    assert "1 of 1 iterations" in table
    assert [s.label for s in maml_curves.panels([curve])[0].series] == [
        "before adaptation",
        "after one step",
    ]
