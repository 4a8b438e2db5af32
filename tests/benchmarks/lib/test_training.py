"""How a benchmark's run ends, as its notes tell it, and that nothing of it outlives it."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import psutil
from benchmarks.lib.training import run_process as real_run_process  # before the fixture's stand-in
from benchmarks.lib.training import run_until as real_run_until

from benchmarks.lib import training


def test_a_run_past_its_limit_is_killed_and_its_note_says_so(tmp_path: Path) -> None:
    code = "import sys, time; print('a warning', file=sys.stderr, flush=True); time.sleep(60)"
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    done = real_run_process([sys.executable, "-c", code], 1.0, tmp_path)
    assert done.timed_out
    assert done.returncode == -9
    assert done.tail == f"killed at its time limit, {done.wall_s:.0f} s"
    left = {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()}
    assert left <= before  # the run's process is gone


def test_a_failed_run_note_has_its_exit_code_and_last_lines() -> None:
    done = training.Finished(3.0, 1, "", "one\ntwo\nthree\nfour\n", False)
    assert done.tail == "rc 1: two | three | four"


def test_a_stopped_run_leaves_no_process_of_its_group_behind(tmp_path: Path) -> None:
    """As Sample Factory's workers do: a child that outlives its parent's exit on SIGTERM."""
    child = "import time; time.sleep(60)"
    code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', {child!r}])\n"
        "print('child', p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    log = tmp_path / "run.log"
    how, _, text = real_run_until([sys.executable, "-c", code], log, tmp_path, None,
                                  lambda: "child" in log.read_text())  # fmt: skip
    assert how == "until"
    pid = int(text.split()[1])
    with contextlib.suppress(psutil.NoSuchProcess):  # SIGKILL lands in a moment
        child_process = psutil.Process(pid)
        child_process.wait(timeout=5)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
