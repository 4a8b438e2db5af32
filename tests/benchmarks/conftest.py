"""The benchmark suite's command line in this process (`benchmarks.__main__.main`),
and the training processes a benchmark starts run in this process too.

A benchmark times whole processes; its tests check what it does with them (the
commands, what it reads back, its report), which does not need an interpreter and
torch started for each: `pararl train` and the SB3 anchor run here, through their own
`main`, their output captured as a process's would be. `make bench-quick` runs them as
real processes. The import warm-up process is skipped.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main

from benchmarks.lib import training

PNG = b"\x89PNG\r\n\x1a\n"
REAL_RUN_PROCESS = training.run_process


def _entry(module: str) -> Callable[[list[str]], int] | None:
    """The `main` of a module the benchmarks start with `python -m` (None: not one)."""
    if module == "pararl.cli":
        from pararl.cli import main as pararl_main

        return pararl_main
    if module == "benchmarks.lib.sb3":
        from benchmarks.lib import sb3

        return sb3.main
    return None


def run_in_process(cmd: Sequence[str], timeout_s: float, cwd: Path) -> training.Finished:
    """`training.run_process` for `python -m pararl.cli ...` and the SB3 anchor: their
    `main` in this process; anything else as a real process."""
    entry = _entry(cmd[2]) if len(cmd) > 2 and cmd[1] == "-m" else None
    if entry is None:
        return REAL_RUN_PROCESS(cmd, timeout_s, cwd)
    out, err, here = io.StringIO(), io.StringIO(), Path.cwd()
    start = time.perf_counter()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = entry(list(cmd[3:]))
            except SystemExit as exc:  # an option parser's own exit
                code = int(exc.code or 0)
    finally:
        os.chdir(here)
    return training.Finished(
        time.perf_counter() - start, code, out.getvalue(), err.getvalue(), False
    )


@pytest.fixture(autouse=True)
def _training_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(training, "run_process", run_in_process)
    monkeypatch.setattr(training, "warm_up", lambda workdir: None)


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
