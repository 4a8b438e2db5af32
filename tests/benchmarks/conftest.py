"""The benchmark suite's command line in this process (`benchmarks.__main__.main`),
and the training processes a benchmark starts run in this process too.

A benchmark times whole processes; its tests check what it does with them (the
commands, what it reads back, its report), which does not need an interpreter and
torch started for each: `pararl train` and the SB3 anchor run here, through their own
`main`, their output captured as a process's would be, and a run `training.run_until`
stops is stopped as a process is, by SIGTERM, which their own handlers take. `make
bench-quick` runs them as real processes. The import warm-up process is skipped.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main

from benchmarks.lib import harness, training

PNG = b"\x89PNG\r\n\x1a\n"
REAL_RUN_PROCESS = training.run_process
REAL_RUN_UNTIL = training.run_until


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


def run_until_in_process(cmd: Sequence[str], log_path: Path, cwd: Path, deadline: float | None,
                         until: Callable[[], bool] | None = None) -> training.Stopped:  # fmt: skip
    """`training.run_until` for `python -m pararl.cli ...` and the SB3 anchor: their
    `main` in this process, its output appended to the log, watched from a thread that
    sends SIGTERM to this process when the deadline passes or `until()` holds (a
    SIGTERM outside their handlers is dropped); anything else as a real process."""
    entry = _entry(cmd[2]) if len(cmd) > 2 and cmd[1] == "-m" else None
    if entry is None:
        return REAL_RUN_UNTIL(cmd, log_path, cwd, deadline, until)
    from benchmarks.lib import sb3

    sb3.STOP.clear()  # a process of its own starts with it clear
    how: list[training.Ending] = ["ended"]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(training.POLL_S):
            if deadline is not None and time.monotonic() >= deadline:
                how[0] = "deadline"
            elif until is not None and until():
                how[0] = "until"
            else:
                continue
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
            return

    log_path.parent.mkdir(parents=True, exist_ok=True)
    offset = log_path.stat().st_size if log_path.exists() else 0
    here, watcher = Path.cwd(), threading.Thread(target=watch, daemon=True)
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    os.chdir(cwd)
    try:
        with log_path.open("a", buffering=1) as log, contextlib.redirect_stdout(log), \
                contextlib.redirect_stderr(log):  # fmt: skip
            watcher.start()
            try:
                code = entry(list(cmd[3:]))
            except SystemExit as exc:  # an option parser's own exit
                code = int(exc.code or 0)
    finally:
        done.set()
        watcher.join()
        os.chdir(here)
        signal.signal(signal.SIGTERM, previous)
    with log_path.open("rb") as f:
        f.seek(offset)
        return how[0], code, f.read().decode(errors="replace")


@pytest.fixture(autouse=True)
def _training_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(training, "run_process", run_in_process)
    monkeypatch.setattr(training, "run_until", run_until_in_process)
    monkeypatch.setattr(training, "warm_up", lambda workdir: None)


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, Any]]:
    """`bench(NAME, *args)`: run it with results in tmp_path (BENCHMARKS.md there too);
    asserts exit 0 and that every process it started is gone; returns NAME.json.
    `figure=False`: its panels are built but not drawn (matplotlib takes most of a
    second a figure; the tests that check a PNG draw it)."""

    def run(name: str, *args: str, figure: bool = True) -> dict[str, Any]:
        if not figure:
            monkeypatch.setattr(harness, "save_figure", lambda *_: None)
        before = {p.pid for p in mp.active_children()}
        where = ["--out-dir", str(tmp_path), "--benchmarks-md", str(tmp_path / "BENCHMARKS.md")]
        assert main([name, *args, *where]) == 0
        assert {p.pid for p in mp.active_children()} <= before
        data: dict[str, Any] = json.loads((tmp_path / f"{name}.json").read_text())
        return data

    return run
