"""Ctrl-C: a script stepping a ParallelVectorEnv exits on SIGINT and leaves no
process and no shared memory behind; workers themselves ignore SIGINT."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from tests.vector.conftest import (
    VecFactory,
    alive_after,
    descendants,
    new_shm_entries,
    pid_alive,
    shm_entries,
    stepcost_fns,
)

pytestmark = pytest.mark.timeout(30)

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import functools
    import sys

    import gymnasium as gym
    import numpy as np

    import pararl.envs  # noqa: F401
    from pararl.vector import ParallelVectorEnv


    def main() -> None:
        fns = [functools.partial(gym.make, "pararl/StepCost-v0", cost_us=200) for _ in range(4)]
        env = ParallelVectorEnv(fns, num_workers=2, context=sys.argv[1])
        env.reset(seed=0)
        print("ready", *env.worker_pids, flush=True)
        actions = np.ones(4, dtype=np.int64)
        while True:
            env.step(actions)


    if __name__ == "__main__":
        main()
    """
)


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the script did not get ready within {timeout} s; stderr:\n{err}")
    return proc.stdout.readline()


def run_and_signal(
    tmp_path: Path, method: str, signum: int
) -> tuple[int, str, list[int], set[int]]:
    """Start the stepping script, wait for "ready", send `signum` while it steps.
    Returns its exit code, its stderr, its worker pids and all its descendants."""
    script = tmp_path / "stepper.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), method],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = read_line(proc, 20.0)
        assert line.startswith("ready"), line
        worker_pids = [int(pid) for pid in line.split()[1:]]
        assert len(worker_pids) == 2
        family = descendants(proc.pid)  # workers, and forkserver / resource tracker
        assert set(worker_pids) <= family
        time.sleep(0.2)  # in the stepping loop
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=10.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, err, worker_pids, family


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_ctrl_c_stops_script_and_workers(tmp_path: Path, method: str) -> None:
    shm_before = shm_entries()
    returncode, err, worker_pids, family = run_and_signal(tmp_path, method, signal.SIGINT)
    assert returncode != 0
    assert "KeyboardInterrupt" in err
    assert alive_after(worker_pids, 2.0) == []
    assert alive_after(sorted(family), 5.0) == [], "a child of the script outlived it"
    assert new_shm_entries(shm_before) == set()


def test_workers_exit_when_the_script_is_killed(tmp_path: Path) -> None:
    """SIGKILL gives the script no chance to clean up: orphaned workers notice on
    their own (their parent changes) and exit."""
    shm_before = shm_entries()
    returncode, _, worker_pids, family = run_and_signal(tmp_path, "fork", signal.SIGKILL)
    assert returncode == -signal.SIGKILL
    assert alive_after(sorted(family), 5.0) == [], "a worker outlived its killed parent"
    assert alive_after(worker_pids, 0.0) == []
    assert new_shm_entries(shm_before) == set()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_ignore_sigint(make_vec: VecFactory, method: str) -> None:
    vec = make_vec("parallel", stepcost_fns(4, cost_us=100_000), num_workers=2, context=method)
    # the same envs without the cost (observations depend on the seed and the actions
    # alone): the twin's steps need not burn 0.4 s of CPU each
    twin = make_vec("serial", stepcost_fns(4))
    vec.reset(seed=1)
    twin.reset(seed=1)
    actions = np.array([0, 1, 1, 0])
    for pid in vec.worker_pids:
        os.kill(pid, signal.SIGINT)  # while idle
    vec.step_async(actions)
    time.sleep(0.05)
    for pid in vec.worker_pids:
        os.kill(pid, signal.SIGINT)  # while stepping
    time.sleep(0.1)
    assert all(pid_alive(pid) for pid in vec.worker_pids)
    np.testing.assert_array_equal(vec.step_wait()[0], twin.step(actions)[0])
    np.testing.assert_array_equal(vec.step(actions)[0], twin.step(actions)[0])
