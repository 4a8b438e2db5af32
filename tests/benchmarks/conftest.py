"""The benchmark suite's command line in this process (`benchmarks.__main__.main`)."""

from __future__ import annotations

import json
import multiprocessing as mp
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def bench(tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """`bench(NAME, *args)`: run it with results in tmp_path (BENCHMARKS.md there too);
    asserts exit 0 and that every process it started is gone; returns NAME.json."""

    def run(name: str, *args: str) -> dict[str, Any]:
        before = {p.pid for p in mp.active_children()}
        where = ["--out-dir", str(tmp_path), "--benchmarks-md", str(tmp_path / "BENCHMARKS.md")]
        assert main([name, *args, *where]) == 0
        assert {p.pid for p in mp.active_children()} <= before
        data: dict[str, Any] = json.loads((tmp_path / f"{name}.json").read_text())
        return data

    return run
