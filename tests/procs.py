"""Process helpers shared by the tests: liveness, interrupting a training run (and
checking it stopped as Ctrl-C promises), and the entries a test adds to /dev/shm."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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


def ctrl_c_train(run: Path, *args: str) -> str:
    """`pararl train ARGS` into `run` (plain progress, a log line every 0.2 s, no
    TensorBoard, a budget it never reaches), Ctrl-C'd once it logs its first rate.
    It must stop as Ctrl-C promises: exit 130, one line saying it was interrupted,
    the interrupted checkpoint saved, no child process and no shared-memory entry
    left. Returns what it wrote to stderr after the Ctrl-C."""
    shm_before = shm_entries()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pararl.cli", "train", *args, "--run-dir", str(run),
         "--total-steps", "100000000", "--progress", "plain", "--log-every-s", "0.2",
         "--no-tensorboard"],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    children, err = interrupt_training(proc)
    assert children  # workers, actors or replicas: each caller's run has some
    assert proc.returncode == 130, err
    assert err.count("pararl: interrupted") == 1, err
    assert (run / "checkpoints" / "interrupted.pt").is_file()
    assert alive_after(children, 0.5) == []
    assert new_shm_entries(shm_before) == set()
    return err


# --- shared memory ---------------------------------------------------------------------

SHM = "/dev/shm"


def ctrl_c_while_saving(monkeypatch: Any, which: Callable[[Any], bool]) -> None:
    """Ctrl-C (SIGINT to this process) just before `torch.save` writes an object that
    `which` picks: a key pressed while a checkpoint is written."""
    import torch

    saving = torch.save

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        if which(obj):
            os.kill(os.getpid(), signal.SIGINT)
        saving(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)


def shm_entries() -> set[str]:
    return set(os.listdir(SHM))


def _other_workers() -> set[int]:
    """Under pytest-xdist: the other workers of this run and their descendants (the
    tests that run beside this one); otherwise none."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return set()
    me = psutil.Process()
    parent = me.parent()
    if parent is None:
        return set()
    pids: set[int] = set()
    for sibling in parent.children():
        if sibling.pid == me.pid:
            continue
        pids.add(sibling.pid)
        with contextlib.suppress(psutil.Error):
            pids |= {p.pid for p in sibling.children(recursive=True)}
    return pids


def _held_by(pids: set[int], names: set[str]) -> set[str]:
    """Those of the /dev/shm entries `names` that one of `pids` has open or mapped."""
    wanted = {f"{SHM}/{name}": name for name in names}
    held: set[str] = set()
    for pid in pids:
        paths: list[str] = []
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/maps") as maps:
                paths += [line.split(maxsplit=5)[-1].rstrip("\n") for line in maps]
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    paths.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        held |= {wanted[path] for path in paths if path in wanted}
    return held


def new_shm_entries(before: set[str]) -> set[str]:
    """Entries in /dev/shm now that are not in `before` (a `shm_entries()`).

    Run alone, that is all of them. Under pytest-xdist the tests of the other workers
    make entries of their own meanwhile (a named semaphore while it lives, the
    temporary file of one being made): an entry one of their processes has open or
    mapped is theirs, as is one that is gone again a moment later, made and removed
    by them while this looked (an entry left behind stays)."""
    new = shm_entries() - before
    others = _other_workers() if new else set()
    if not others:
        return new
    return (new - _held_by(others, new)) & shm_entries()
