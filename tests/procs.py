"""Process helpers shared by the tests: liveness, and interrupting a training run."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Sequence

import psutil


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie counts as dead)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def alive_after(pids: Sequence[int], timeout: float = 2.0) -> list[int]:
    """Those of `pids` still alive after waiting up to `timeout` s for them to die."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in pids if pid_alive(pid)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.02)


def interrupt_training(
    proc: subprocess.Popen[str], sig: signal.Signals = signal.SIGINT
) -> tuple[list[int], str]:
    """Ctrl-C (or `sig`) a `pararl train` process (stderr piped, text) once it logs
    its first rate; returns its descendants at that moment and the rest of its stderr."""
    assert proc.stderr is not None
    for line in proc.stderr:
        if "steps/s" in line:
            break
    children = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    return children, err
