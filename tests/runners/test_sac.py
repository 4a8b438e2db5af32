"""SAC runs end to end on the off-policy engine: serial and sync modes on the same
data give the same parameters; async actors keep the update-to-data ratio within its
bound; checkpoints resume; `pararl evaluate` and `--video` play the deterministic
policy; the defaults are printed and saved; discrete actions are refused in one line;
prioritized replay updates its priorities."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl import SACConfig, train
from pararl.algos.sac import SACState
from pararl.replay.prioritized import PrioritizedReplay
from pararl.runners.offpolicy import OffPolicyLoop, chunk_for, make_source
from tests.runners.saved import final_state

SMALL: dict[str, Any] = dict(
    env="Pendulum-v1",
    total_steps=400,
    learning_starts=200,
    batch_size=32,
    buffer_size=10_000,
    hidden=(16,),
    workers=1,
    envs_per_worker=2,
    eval_every=10**9,  # no evaluation on the way: the runs are about the data
    eval_in="inline",
    checkpoint_every=10**9,
    tensorboard=False,
    progress="none",
    seed=4,
)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """The learner's thread count as `pararl train` sets it for small networks (tests
    that build the loop themselves): two threads beside an actor process ran each
    update several times slower on a loaded 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def final(run_dir: Path) -> dict[str, Any]:
    return final_state(run_dir)


@pytest.fixture(scope="module")
def serial_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A serial run of SMALL, trained once for the module (tests that change it copy it)."""
    run = tmp_path_factory.mktemp("sac") / "serial"
    train(SACConfig(mode="serial", run_dir=run, **SMALL))  # type: ignore[arg-type]
    return run


def test_serial_and_sync_give_the_same_parameters(serial_run: Path, tmp_path: Path) -> None:
    """The same envs and seeds stepped in this process or by a worker process: the same
    transitions, the same batches and noise, so the same actor, critics, targets and
    temperature, bit for bit."""
    train(SACConfig(mode="sync", run_dir=tmp_path / "sync", **SMALL))  # type: ignore[arg-type]
    serial, sync = final(serial_run), final(tmp_path / "sync")
    # one update per env step after the first 200 (the last vector step's are not due
    # before the budget ends the run)
    assert serial["learner"]["updates"] == sync["learner"]["updates"] == 400 - 200 - 2
    np.testing.assert_array_equal(serial["replay"]["action"], sync["replay"]["action"])
    for net in ("actor", "critic", "critic_target"):
        a, b = serial["learner"][net], sync["learner"][net]
        assert all(torch.equal(a[k], b[k]) for k in a), net
    assert torch.equal(serial["learner"]["log_alpha"], sync["learner"]["log_alpha"])
    assert serial["learner"]["log_alpha"] != 0.0  # the temperature was tuned


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("actors", [1, 2])
def test_async_holds_the_update_to_data_ratio(actors: int, tmp_path: Path) -> None:
    """Actor processes with the learner loop: after every turn the learner is neither
    ahead of the ratio nor behind it by more than one chunk's updates (two actors'
    chunks arriving together are taken one at a time, each once its updates are
    done), and the data it learns from came through the shared-memory outboxes from
    the actor's own copy."""
    options = {**SMALL, "total_steps": 800, "workers": actors}
    config = SACConfig(mode="async", run_dir=tmp_path, **options)  # type: ignore[arg-type]
    env = gym.make(config.env)
    spaces = env.observation_space, env.action_space
    env.close()
    state = SACState(config.for_spaces(*spaces), *spaces, torch.device("cpu"))
    chunk = chunk_for(state.settings.replay_ratio)
    assert chunk == 64  # one update per env step: 64 transitions, 64 updates' worth
    loop = OffPolicyLoop(state, make_source(state, "async", print))
    bound = state.settings.replay_ratio * chunk  # one actor's chunk
    behind = []
    try:
        deadline = time.monotonic() + 60
        while state.env_steps < config.budget:
            assert time.monotonic() < deadline
            loop.iterate()
            allowed = int(state.settings.replay_ratio * (state.env_steps - 200))
            if state.can_learn():
                behind.append(allowed - state.learner.updates)
    finally:
        loop.close()
    assert min(behind) >= 0  # never ahead of the data
    assert max(behind) <= bound
    assert max(behind) > 0  # chunks did arrive while it learned
    # every transition taken is stored: one per env step but the reset step after each
    # of Pendulum's 200-step episodes (NEXT_STEP autoreset)
    assert 0 < state.env_steps - state.replay.added <= state.env_steps // 200 + 4
    assert state.learner.updates >= state.env_steps - 200 - bound
    assert state.replay.action.dtype == np.float32  # type: ignore[union-attr]
    low, high = spaces[1].low, spaces[1].high  # type: ignore[attr-defined]
    actions = state.replay.action[: len(state.replay)]  # type: ignore[union-attr]
    assert (actions >= low).all()
    assert (actions <= high).all()


def test_resume_evaluate_and_video(serial_run: Path, tmp_path: Path, pararl: Any) -> None:
    run = tmp_path / "run"
    shutil.copytree(serial_run, run)  # the module's run stays as it finished
    first = final(run)
    session = train(SACConfig(resume=run, total_steps=700))
    second = final(run)
    assert session is not None
    assert (first["env_steps"], second["env_steps"]) == (400, 700)
    assert second["learner"]["updates"] == first["learner"]["updates"] + 300  # no refill
    kept = len(first["replay"]["obs"])
    np.testing.assert_array_equal(second["replay"]["obs"][:kept], first["replay"]["obs"])
    done = pararl("evaluate", str(run), "--episodes", "2", "--checkpoint", "final")
    assert done.returncode == 0, done.stderr
    assert "Pendulum-v1: mean return" in done.stdout
    video = tmp_path / "pendulum.gif"
    done = pararl(
        "evaluate", str(run), "--episodes", "1", "--max-steps", "20", "--video", str(video)
    )
    assert done.returncode == 0, done.stderr
    assert video.read_bytes().startswith(b"GIF8")


def test_defaults_are_printed_and_saved(tmp_path: Path, pararl: Any) -> None:
    """rl-zoo's settings, filled in for continuous actions and for Pendulum-v1's own
    row (its learning rate): printed at start, saved; `--learner-threads` given wins
    over pararl's choice (one thread for a network this small)."""
    done = pararl(
        "train", "sac", "--env", "Pendulum-v1", "--mode", "serial", "--total-steps", "300",
        "--learning-starts", "100", "--hidden", "16", "--eval-every", "300",
        "--learner-threads", "2", "--eval-episodes", "1", "--eval-in", "inline", "--no-tensorboard",
        "--progress", "plain", "--run-dir", str(tmp_path / "run"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if "defaults for continuous" in x)
    assert "actions, tuned for Pendulum-v1: " in line
    for shown in ("lr 0.001", "gamma 0.99", "buffer_size 1000000", "batch_size 256", "tau 0.005"):
        assert shown in line
    assert "learning_starts" not in line  # given
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (saved["algo"], saved["lr"], saved["batch_size"], saved["replay_ratio"]) == (
        "SACConfig",
        1e-3,
        256,
        1.0,
    )
    assert saved["resolved"]["defaults_tuned_for"] == "Pendulum-v1"
    assert saved["learner_threads"] == saved["resolved"]["learner_threads"] == 2
    assert "critic_loss" in (tmp_path / "run" / "metrics.csv").read_text().splitlines()[0]


def test_discrete_actions_are_refused_in_one_line(tmp_path: Path, pararl: Any) -> None:
    done = pararl("train", "sac", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("pararl: error: SAC needs a continuous (Box) action space")
    assert not (tmp_path / "run").exists()  # a refused start leaves no run directory


@pytest.mark.usefixtures("one_thread")
def test_prioritized_replay_learns_from_td_errors(tmp_path: Path) -> None:
    config = SACConfig(mode="serial", prioritized=True, run_dir=tmp_path, **SMALL)  # type: ignore[arg-type]
    env = gym.make(config.env)
    spaces = env.observation_space, env.action_space
    env.close()
    state = SACState(config.for_spaces(*spaces), *spaces, torch.device("cpu"))
    assert isinstance(state.replay, PrioritizedReplay)
    loop = OffPolicyLoop(state, make_source(state, "serial", print))
    try:
        while state.learner.updates < 50:
            loop.iterate()
    finally:
        loop.close()
    leaves = state.replay.tree.leaves[: len(state.replay)]
    assert len(np.unique(leaves)) > 10  # new priorities from TD errors, not all the max
