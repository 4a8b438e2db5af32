"""Every DQN mode runs the one learner loop, so they agree on what a run produces:
the same checkpoint layout and shapes, the step budget spent, the updates the
replay ratio allows, and published weights reaching the actors. Parameter
averaging with one replica is the serial loop itself."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from pararl import DQNConfig, train
from pararl.errors import UsageError
from pararl.runners.offpolicy import PUBLISH_EVERY
from tests.runners.saved import final_state

RUN = dict(
    total_steps=1_024,
    learning_starts=256,
    replay_ratio=0.25,
    eval_every=512,
    eval_episodes=2,
    checkpoint_every=100_000,
    tensorboard=False,
    progress="none",
    hidden=(16,),
    batch_size=16,
    envs_per_worker=4,
    target_return=1e9,
    average_every=32,  # every 32 vector steps of a replica with 4 envs
    eval_in="inline",  # no evaluation child to start: these tests do not check it
)


def shapes(state: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    learner = state["learner"]
    return {
        f"{net}.{k}": tuple(v.shape) for net in ("q", "q_target") for k, v in learner[net].items()
    }


def expected_updates(env_steps: int) -> int:
    return int(RUN["replay_ratio"] * (env_steps - RUN["learning_starts"]))  # type: ignore[operator]


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = tmp_path_factory.mktemp("serial")
    train(DQNConfig(mode="serial", workers=1, seed=1, run_dir=run, **RUN))  # type: ignore[arg-type]
    return final_state(run)


@pytest.mark.parametrize("mode", ["sync", "async", "averaging"])
def test_modes_agree_with_the_serial_loop(
    mode: str, serial: dict[str, Any], tmp_path: Path
) -> None:
    config = DQNConfig(mode=mode, workers=1, seed=1, run_dir=tmp_path, **RUN)  # type: ignore[arg-type]
    if mode == "async":  # long enough for weights to be published many times, logged often
        config.total_steps, config.log_every_s = 4_096, 0.05
    train(config)
    state = final_state(tmp_path)
    assert shapes(state) == shapes(serial)
    assert set(state["replay"]) == set(serial["replay"])
    # the budget is spent, overshooting by at most one chunk of an actor
    assert config.total_steps <= state["env_steps"] <= config.total_steps + 256
    # the replay ratio holds in every mode, up to the updates of one turn of the loop
    # and the chunk that ended the run (256 transitions for an actor process)
    due = expected_updates(state["env_steps"])
    last_chunk = 1 if mode != "async" else int(256 * RUN["replay_ratio"])  # type: ignore[operator]
    assert due - last_chunk - PUBLISH_EVERY <= state["learner"]["updates"] <= due
    assert state["replay"]["added"] == len(state["replay"]["action"])  # nothing dropped
    if mode == "averaging":
        # one replica is the serial run: same seed, same streams, the same data (its
        # average over one replica changes nothing)
        assert state["replicas"] == 1
        assert state["env_steps"] == serial["env_steps"]
        for key in ("obs", "action", "ret", "discount"):
            assert (state["replay"][key] == serial["replay"][key]).all(), key
    if mode == "async":
        _assert_actors_took_published_weights(tmp_path, int(state["learner"]["updates"]))


def _assert_actors_took_published_weights(run_dir: Path, updates: int) -> None:
    """The weights version actors acted with rises through the run and ends near the
    learner's (a publication that never reaches the actors fails this)."""
    with (run_dir / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("actor_version")]
    versions = [int(float(r["actor_version"])) for r in rows]
    assert len(versions) >= 2
    assert versions[-1] > versions[0]
    assert versions[-1] >= updates // 2


def test_an_actor_process_collects_what_the_serial_loop_collects(tmp_path: Path) -> None:
    """With the weights held still (no update before the budget) and a constant
    epsilon, acting in an actor process is acting in this process: the same envs,
    seeds and random draws, so the replay memories hold the same transitions in the
    same order. What async changes is only when weights reach the actor (its policy
    lag), never the data that its acting produces."""
    still = {**RUN, "learning_starts": 10_000, "eps_start": 0.3, "eps_end": 0.3}
    states = {}
    for mode in ("serial", "async"):
        run = tmp_path / mode
        train(DQNConfig(mode=mode, workers=1, seed=3, run_dir=run, **still))  # type: ignore[arg-type]
        states[mode] = final_state(run)["replay"]
    serial, actor = states["serial"], states["async"]
    rows = serial["added"]
    # every env step makes a transition but the reset steps after episode ends (NEXT_STEP
    # autoreset) and the n-step transitions still open at the end
    assert rows >= 0.9 * RUN["total_steps"]  # type: ignore[operator]
    assert actor["added"] >= rows
    for key in ("obs", "action", "ret", "next_obs", "discount"):
        assert (actor[key][:rows] == serial[key][:rows]).all(), key
    assert len(set(serial["action"][:rows].tolist())) == 2  # both actions, greedy and random


def test_acting_lag_has_the_serial_loop_act_with_older_weights(tmp_path: Path) -> None:
    """`--acting-lag N`: the serial loop acts with the weights of N updates ago, the
    lag an async actor has, and says so in `policy_lag`; async refuses it."""
    lag = 24
    config = DQNConfig(mode="serial", workers=1, seed=1, run_dir=tmp_path / "lag", **RUN)  # type: ignore[arg-type]
    config.acting_lag, config.log_every_s = lag, 0.0
    train(config)
    with (tmp_path / "lag" / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("policy_lag")]
    late = [float(r["policy_lag"]) for r in rows if int(r["updates"]) > 2 * lag]
    assert late
    assert all(value == lag for value in late)
    with pytest.raises(UsageError, match="--acting-lag is for --mode serial or sync"):
        train(DQNConfig(mode="async", workers=1, acting_lag=lag, run_dir=tmp_path / "a", **RUN))  # type: ignore[arg-type]
