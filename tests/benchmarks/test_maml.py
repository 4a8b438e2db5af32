"""`python -m benchmarks maml`: the quick run end to end (pararl's sampler and the
sampling post's design on the same meta-iterations); bad options exit with code 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main

from tests.benchmarks.conftest import PNG


def test_quick_run(bench: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    data = bench("maml", "--quick")
    assert (tmp_path / "bench_maml.png").read_bytes()[:8] == PNG
    rows = data["results"]
    assert [r["design"] for r in rows] == ["pararl", "seed"]
    for row in rows:
        assert row["tasks"] == 4
        assert row["episodes"] == 4
        parts = [row[p]["median"] for p in ("sampling", "adaptation", "outer")]
        assert row["iteration"]["median"] == pytest.approx(sum(parts))
    assert rows[1]["vs_seed"] == 1.0
    seed_s = rows[1]["iteration"]["median"]
    assert rows[0]["vs_seed"] == pytest.approx(rows[0]["iteration"]["median"] / seed_s)
    assert "seed / pararl per meta-iteration" in data["key_ratios"]


@pytest.mark.parametrize("args", [["--workers", "0"], ["--iterations", "0"], ["--envs"]])
def test_bad_options_exit_with_code_2(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["maml", "--quick", "--out-dir", str(tmp_path), *args]) == 2
    assert "error" in capsys.readouterr().err
    assert not (tmp_path / "maml.json").exists()
