"""`python -m benchmarks atari`: the quick run end to end (every backend, JSON, PNG,
tables), the pipe-byte counter (pararl's bytes per step do
not grow with the frames, which travel through shared memory; pickled frames are
counted whole), game names for ale-py and EnvPool, and bad options exiting with 2."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from benchmarks.__main__ import main
from benchmarks.lib.stepping import PipeBytes
from gymnasium.vector import AsyncVectorEnv

from benchmarks import atari as ar
from pararl.envs.atari import AtariOptions, make_atari
from pararl.vector import ParallelVectorEnv

pytest.importorskip("ale_py")
pytestmark = pytest.mark.timeout(120)

PROCESS_BASED = ("pararl_step", "pararl_partial", "gym_async", "sb3_subproc")
# every code path once: `pararl_nospin` is `pararl_step` with another spin_s,
# `envpool_sync` is `ale_sync`'s full steps of a threaded vector env, and `single`
# steps one env as vector's does (test_vector)
QUICK_BACKENDS = ("pararl_step", "pararl_partial", "envpool_async", "ale_sync", "ale_async",
                  "gym_async", "sb3_subproc")  # fmt: skip


def installed(backend: str) -> bool:
    package = {"envpool": "envpool", "sb3": "stable_baselines3"}.get(backend.split("_")[0])
    return package is None or importlib.util.find_spec(package) is not None


@pytest.mark.slow
def test_quick_run_measures_every_backend(
    bench: Callable[..., dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # its panels are vector's (`stepping.panel`), drawn in test_vector
    data = bench("atari", "--quick", "--backends", *QUICK_BACKENDS, figure=False)
    assert not (tmp_path / "BENCHMARKS.md").exists()  # --quick leaves it alone
    [result] = data["results"]["games"]
    assert result["env_id"] == "ALE/Pong-v5"
    cells = {c["backend"]: c for c in result["cells"]}
    assert list(cells) == list(QUICK_BACKENDS)
    for name, cell in cells.items():
        if not installed(name):
            assert (cell["status"], cell["note"][-23:]) == (
                "skipped",
                "pip install 'pararl[bench]'",
            )
            continue
        assert cell["status"] == "ok", cell
        assert (cell["workers"], cell["num_envs"]) == (2, 2)
        assert 0 < cell["rate"]["min"] <= cell["rate"]["median"] <= cell["rate"]["max"]
        assert len(cell["rate"]["samples"]) == 2
        assert cell["process_cpu_us"] >= 0.9 * cell["thread_cpu_us"]  # the thread is in it
        assert (cell["pipe_bytes"] is not None) == (name in PROCESS_BASED)
    if installed("sb3_subproc"):  # SB3 pickles each env's 84×84 frame through its pipe
        assert cells["sb3_subproc"]["pipe_bytes"] > 84 * 84
    assert cells["pararl_step"]["pipe_bytes"] < 84 * 84
    out = capsys.readouterr().out
    assert "| game | workers | best pararl | best EnvPool |" in out
    assert "| workers | envs/worker | envs | backend | agent steps/s (min–max) |" in out


def bytes_per_step(side: int, shared_memory: bool, steps: int = 10) -> float:
    """Pipe bytes per agent step of Pong at `side`×`side` pixels: pararl's vector env
    (frames in shared memory), or AsyncVectorEnv pickling its observations."""
    fns = [functools.partial(make_atari, "ALE/Pong-v5", AtariOptions(screen_size=side))] * 2
    if shared_memory:
        venv: Any = ParallelVectorEnv(fns, num_workers=2)
        pipes = PipeBytes(venv._transport.group.conns)
    else:
        venv = AsyncVectorEnv(fns, shared_memory=False, context="fork")
        pipes = PipeBytes(venv.parent_pipes)
    try:
        venv.reset(seed=0)
        before = pipes.total
        for i in range(steps):
            venv.step(np.full(2, i % 6))
        return (pipes.total - before) / (2 * steps)
    finally:
        venv.close()


def test_pararl_pipe_bytes_per_step_do_not_grow_with_the_frames() -> None:
    small, large = bytes_per_step(84, True), bytes_per_step(168, True)
    assert small == large
    assert 0 < small < 84 * 84  # commands and small replies, not a frame


def test_pickled_frames_are_counted_whole() -> None:
    small, large = bytes_per_step(84, False), bytes_per_step(168, False)
    assert small > 4 * 84 * 84  # a stack of 4 frames per env
    assert large - small >= 4 * (168 * 168 - 84 * 84)


@pytest.mark.parametrize(
    ("env_id", "game", "envpool_id"),
    [
        ("ALE/Pong-v5", "pong", "Pong-v5"),
        ("ALE/Breakout-v5", "breakout", "Breakout-v5"),
        ("ALE/MontezumaRevenge-v5", "montezuma_revenge", "MontezumaRevenge-v5"),
        ("SpaceInvadersNoFrameskip-v4", "space_invaders", "SpaceInvaders-v5"),
    ],
)
def test_game_names_for_ale_py_and_envpool(env_id: str, game: str, envpool_id: str) -> None:
    assert (ar.game(env_id), ar.envpool_id(env_id)) == (game, envpool_id)


@pytest.mark.parametrize(
    "args", [["--repeats", "0"], ["--envs-per-worker", "0"], ["--envs", "CartPole-v1"]]
)
def test_bad_options_exit_with_code_2(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["atari", "--quick", "--out-dir", str(tmp_path), *args]) == 2
    assert "benchmarks: error:" in capsys.readouterr().err
    assert not (tmp_path / "atari.json").exists()
