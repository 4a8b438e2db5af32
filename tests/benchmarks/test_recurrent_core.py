"""`python -m benchmarks recurrent_core`: a tiny run end to end times every way of
replaying sequences and the no-cut floor; bad options exit with code 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from benchmarks.__main__ import main


def test_tiny_run(bench: Callable[..., dict[str, Any]]) -> None:
    data = bench("recurrent_core", "--quick", "--envs", "3", "--features", "4")
    (row,) = data["results"]
    assert set(row["ms"]) == {"padded", "packed", "loop", "floor"}
    assert all(s["median"] > 0 for s in row["ms"].values())
    assert row["pieces"] == 3 + row["cuts"]  # each cut starts one more piece
    assert "padded" in data["key_ratios"]


@pytest.mark.parametrize("args", [["--calls", "0"], ["--steps", "0"], ["--sizes"]])
def test_bad_options_exit_with_code_2(args: list[str]) -> None:
    assert main(["recurrent_core", "--quick", *args]) == 2
