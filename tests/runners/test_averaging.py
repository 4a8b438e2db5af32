"""Parameter averaging: the collective math on real gloo groups, and the
`--mode averaging` run end to end (local spawn and torchrun-style ranks), its
failures and its bad input."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest
import torch
from torch import nn

from pararl import DQNConfig, checkpoint, train
from pararl.distributed.launch import Rendezvous, from_environment, join, leave, local_rendezvous
from pararl.errors import UsageError
from pararl.mp.procs import ProcessGroup
from pararl.optim import FlatAdam
from pararl.vector import WorkerError
from pararl.weights.averaging import adam_moments, average_parameters, average_tensors
from tests.procs import ctrl_c_train
from tests.runners.test_dqn import SMALL

CPU = torch.device("cpu")
# the DQN end-to-end tests' small run, a little longer, averaging every 4 updates; the
# evaluations where `auto` puts them (these tests check the processes a run leaves)
TINY = {k: v for k, v in SMALL.items() if k != "workers"} | dict(
    total_steps=1_600, eval_every=800, checkpoint_every=800, average_every=4, eval_in="auto"
)


# --- the collective math, on a real group of ranks ---------------------------------


def _rank_main(conn: Connection, rdv: Rendezvous, fn: Callable[[int], Any]) -> None:
    conn.send((True, "started"))
    join(rdv, CPU)
    try:
        result = fn(rdv.rank)
    finally:
        leave()
    conn.send((True, result))


def on_ranks(fn: Callable[[int], Any], world: int = 2) -> list[Any]:
    """`fn(rank)` on every rank of a gloo group: rank 0 here, the others forked."""
    ranks = local_rendezvous(world)
    args = [(rdv, fn) for rdv in ranks[1:]]
    group = ProcessGroup(_rank_main, args, mp.get_context("fork"), name="test-rank")
    try:
        group.await_ready(30)
        join(ranks[0], CPU)
        try:
            results = [fn(0)]
        finally:
            leave()
        for i in range(world - 1):
            assert group.ready([i], 30) == [i]
            results.append(group.receive(i))
        return results
    finally:
        group.close()


def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))


def _params(net: nn.Module) -> list[np.ndarray]:
    return [p.detach().numpy().copy() for p in net.parameters()]


def _identical(rank: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    net = _net(seed=0)  # the same on every rank
    before = _params(net)
    average_parameters(net)
    return before, _params(net)


def test_averaging_identical_replicas_is_the_identity() -> None:
    for before, after in on_ranks(_identical):
        assert all(np.array_equal(b, a) for b, a in zip(before, after, strict=True))


def _train_then_sync(rank: int) -> dict[str, Any]:
    """A common start, local Adam steps on this rank's own data, then one average of
    parameters and moments. Rank 1 takes no step (a replica whose learning has not
    started: zero moments), and the average must still line up."""
    net = _net(seed=0)
    optimizer = FlatAdam(net.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(5 if rank == 0 else 0):
        x, y = torch.randn(32, 4, generator=gen), torch.randn(32, 2, generator=gen)
        optimizer.zero_grad()
        nn.functional.mse_loss(net(x), y).backward()
        optimizer.step()
    before = _params(net)
    average_tensors([*net.parameters(), *adam_moments(optimizer)])
    moments = [m.numpy().copy() for m in adam_moments(optimizer)]
    return {"before": before, "after": _params(net), "moments": moments}


def test_replicas_on_different_data_agree_bitwise_after_a_sync() -> None:
    r0, r1 = on_ranks(_train_then_sync)
    assert not all(np.array_equal(a, b) for a, b in zip(r0["before"], r1["before"], strict=True))
    for a, b in zip(r0["after"], r1["after"], strict=True):
        assert np.array_equal(a, b)  # bitwise: both continue from one state
    for a, b0, b1 in zip(r0["after"], r0["before"], r1["before"], strict=True):
        np.testing.assert_allclose(a, (b0 + b1) / 2, rtol=1e-6, atol=1e-7)
    assert all(np.array_equal(a, b) for a, b in zip(r0["moments"], r1["moments"], strict=True))
    assert any(np.abs(m).sum() > 0 for m in r1["moments"])  # rank 1 got rank 0's half


# --- the rendezvous ------------------------------------------------------------------


def test_torchrun_environment_is_read_and_checked() -> None:
    assert from_environment({}) is None
    env = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    rdv = from_environment({**env, "LOCAL_RANK": "1"})
    assert rdv is not None
    assert (rdv.rank, rdv.world_size, rdv.init_method) == (1, 2, "env://")
    with pytest.raises(UsageError, match="MASTER_ADDR"):
        from_environment({"RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(UsageError, match="not in"):
        from_environment({**env, "RANK": "2"})


# --- the mode end to end ------------------------------------------------------------


def _alive_children(me: psutil.Process) -> set[int]:
    return {
        p.pid
        for p in me.children(recursive=True)
        if p.is_running()
        and p.status() != psutil.STATUS_ZOMBIE
        and "resource_tracker" not in " ".join(p.cmdline())
    }


def test_averaging_mode_trains_resumes_and_leaves_no_process(tmp_path: Path) -> None:
    """Two replicas train, a resume goes on with both, and nothing is left running.
    (One replica is the serial loop itself: `test_modes_agree.py`.)"""
    me = psutil.Process()
    before = _alive_children(me)
    session = train(DQNConfig(mode="averaging", workers=2, run_dir=tmp_path, **TINY))  # type: ignore[arg-type]
    assert session is not None
    first = checkpoint.load(session.run.checkpoint("final"))
    assert first["replicas"] == 2
    # each replica's own steps: the budget's share, a whole number of averaging spans
    # (4 updates at 0.25 per step: 16 steps of its 2 envs)
    steps = 1_600 // 2
    assert first["env_steps"] == steps
    # each replica makes every update its steps allow before it averages: 0.25 per
    # step after its own memory's first 200
    assert first["learner"]["updates"] == (steps - 200) // 4
    assert '"mode": "averaging"' in session.run.config.read_text()
    assert "sync_ms" in session.run.metrics.read_text().splitlines()[0]

    # the checkpoint resumed from and what is left to do go by all replicas' steps,
    # as the step_N names do (a step_N file of fewer steps is not taken for newer)
    from pararl.errors import RunFinished
    from pararl.rundir import RunDir
    from pararl.runners.resume import latest_checkpoint

    checkpoint.save(session.run.checkpoint("step_1024"), {**first, "env_steps": 512})
    assert latest_checkpoint(RunDir(tmp_path), "dqn")[0].name == "final.pt"
    with pytest.raises(RunFinished, match="already has 1,600 env steps"):
        train(DQNConfig(resume=tmp_path, total_steps=1_000))
    resumed = train(DQNConfig(resume=tmp_path, total_steps=3_200))
    assert resumed is not None
    second = checkpoint.load(resumed.run.checkpoint("final"))
    assert second["replicas"] == 2
    assert second["env_steps"] * 2 >= 3_200 > first["env_steps"] * 2
    assert second["learner"]["updates"] > first["learner"]["updates"]
    time.sleep(0.2)
    assert _alive_children(me) <= before


class ChildOnlyFaulty(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole that raises on its 100th step, in a child process only (so in a
    replica of rank > 0, never in rank 0 or its evaluation)."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(gym.make("CartPole-v1", render_mode=render_mode))
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps == 100 and mp.parent_process() is not None:
            raise RuntimeError("ChildOnlyFaulty failed in a replica")
        return super().step(action)


gym.register("pararl-test/ChildOnlyFaulty-v0", entry_point=ChildOnlyFaulty)


def test_failed_replica_is_reported_with_its_rank_and_traceback(tmp_path: Path) -> None:
    me = psutil.Process()
    before = _alive_children(me)
    config = {**TINY, "env": "pararl-test/ChildOnlyFaulty-v0", "total_steps": 100_000}
    start = time.monotonic()
    with pytest.raises(WorkerError, match="replica rank 1 failed") as info:
        train(DQNConfig(mode="averaging", workers=2, run_dir=tmp_path, **config))  # type: ignore[arg-type]
    assert time.monotonic() - start < 30
    assert info.value.worker == 1
    assert "ChildOnlyFaulty failed in a replica" in str(info.value)
    assert info.value.remote_traceback
    assert "step" in info.value.remote_traceback
    assert (tmp_path / "checkpoints" / "interrupted.pt").is_file()
    time.sleep(0.2)
    assert _alive_children(me) <= before


def test_killed_replica_is_reported_without_a_hang(tmp_path: Path) -> None:
    me = psutil.Process()
    before = _alive_children(me)
    killed: list[int] = []

    def kill_a_replica() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            fresh = _alive_children(me) - before
            if fresh:
                time.sleep(1.0)  # mid-run, not at start-up
                os.kill(min(fresh), signal.SIGKILL)
                killed.append(min(fresh))
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_a_replica, daemon=True)
    killer.start()
    config = {**TINY, "total_steps": 10_000_000, "eval_every": 1_000_000}
    with pytest.raises(WorkerError, match=r"replica rank 1 failed.*SIGKILL"):
        train(DQNConfig(mode="averaging", workers=2, run_dir=tmp_path, **config))  # type: ignore[arg-type]
    killer.join(5)
    assert killed
    time.sleep(0.2)
    assert _alive_children(me) <= before


# --- the command line: bad input, Ctrl-C, torchrun-style ranks ----------------------


def pararl_process(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pararl.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["--workers", "0"], "--workers must be >= 1"),
        (["--replay-ratio", "0"], "needs --mode async, not averaging"),
        (["--average-every", "0"], "--average-every must be >= 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], expect: str, tmp_path: Path, pararl: Any
) -> None:
    result = pararl("train", "dqn", "--mode", "averaging", "--run-dir", str(tmp_path), *args)
    err = result.stderr
    assert result.returncode == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert expect in lines[0], err


@pytest.mark.slow
def test_ctrl_c_saves_checkpoint_and_leaves_nothing(tmp_path: Path) -> None:
    # no evaluation child (`--eval-in inline`): test_ppo.py's has one
    ctrl_c_train(tmp_path, "dqn", "--mode", "averaging", "--workers", "2", "--eval-in", "inline")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ranks_started_like_torchrun_train_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pararl: Any
) -> None:
    """Two ranks with torchrun's variables: rank 0 owns the run, rank 1 none. Rank 1 is
    a process of its own; rank 0 is the command line in this process, as the
    collective tests above run their rank 0 here (one interpreter fewer to start)."""
    port = str(_free_port())

    def command(rank: int) -> tuple[tuple[str, ...], dict[str, str]]:
        env = {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank)}
        env |= {"LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
        args = (
            *("train", "dqn", "--mode", "averaging", "--run-dir", str(tmp_path / f"rank{rank}")),
            *("--total-steps", "1600", "--learning-starts", "200", "--eval-every", "800"),
            *("--eval-episodes", "2", "--hidden", "32", "--progress", "none"),
            *("--eval-in", "inline"),  # no evaluation child: not what this checks
            "--no-tensorboard",
        )
        return args, env

    args, env = command(1)
    rank1 = pararl_process(*args, env=env)
    try:
        args, env = command(0)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        rank0 = pararl(*args)
    finally:
        try:
            output = rank1.communicate(timeout=120)
        finally:
            if rank1.poll() is None:
                rank1.kill()
                rank1.communicate()
    assert (rank0.returncode, rank1.returncode) == (0, 0), (rank0.stderr, output)
    assert "step budget reached after" in rank0.stderr
    state = checkpoint.load(tmp_path / "rank0" / "checkpoints" / "final.pt")
    assert state["replicas"] == 2
    assert not (tmp_path / "rank1").exists()
