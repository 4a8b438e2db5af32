"""`python -m benchmarks checkpoint`: a tiny run end to end (both formats saved and
loaded, the same state in files of about the same size); bad options exit with code 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from benchmarks.__main__ import main


def test_tiny_run(bench: Callable[..., dict[str, Any]]) -> None:
    data = bench("checkpoint", "--quick", "--env", "CartPole-v1", "--steps", "400")
    rows = {r["format"]: r for r in data["results"]}
    assert set(rows) == {"weights-only", "pickled"}
    for row in rows.values():
        assert len(row["save_s"]["samples"]) == len(row["load_s"]["samples"]) == 2
        assert row["megabytes"] > 0
    assert 0.5 < rows["weights-only"]["megabytes"] / rows["pickled"]["megabytes"] < 2
    assert data["key_ratios"].startswith("weights-only / pickled: save ")


@pytest.mark.parametrize("args", [["--steps", "0"], ["--repeats", "0"]])
def test_bad_options_exit_with_code_2(args: list[str]) -> None:
    assert main(["checkpoint", "--quick", *args]) == 2
