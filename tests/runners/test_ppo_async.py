"""Asynchronous PPO: the actors' weights trail the learner by exactly the lag asked
for; the actor processes and their serial twin collect the same rollouts; lag 0 is
the serial loop, weight for weight; a killed actor is reported; nothing is left."""

from __future__ import annotations

import copy
import csv
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl import PPOConfig, checkpoint, train
from pararl.cli import main
from pararl.config import env_kind
from pararl.envs.make import env_factory
from pararl.errors import UsageError
from pararl.models import ActorCritic
from pararl.mp.errors import WorkerError
from pararl.mp.threads import every_core_threads
from pararl.runners.ppo_state import PPOState
from pararl.samplers.rollout.actors import ActorPlan, InlineActors, RolloutActors
from pararl.seeding import env_seeds
from tests.procs import alive_after, ctrl_c_train
from tests.runners.test_ppo import SMALL, final_model

ENV = "CartPole-v1"


def _state(num_envs: int) -> PPOState:
    with gym.make(ENV) as env:
        spaces = env.observation_space, env.action_space
    cfg = PPOConfig(env=ENV, num_steps=8, hidden=(8,), act_device="cpu", learn_device="cpu")
    torch.manual_seed(0)  # the same initial weights each time
    return PPOState(cfg.for_env(env_kind(*spaces)), *spaces, num_envs)


def _plan(state: PPOState, lag: int) -> ActorPlan:
    fn = env_factory(ENV, training=True)
    return ActorPlan(state.make_model, fn, state.rollout_spec, None, lag, seed=3)


def _moved(model: ActorCritic, version: int) -> None:
    """The learner moves on: new weights, told apart by their version."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * version)


@pytest.mark.parametrize("lag", [0, 1, 2])
@pytest.mark.parametrize("processes", [True, False])
def test_each_rollout_is_acted_with_the_weights_lag_rollouts_behind(
    lag: int, processes: bool
) -> None:
    """Rollout j is collected with version max(0, j - lag) at every rollout, checked by
    its values: those of that version's weights on its observations, and no other's."""
    torch.set_num_threads(1)
    state = _state(4)
    model = state.learner.model
    kind = RolloutActors if processes else InlineActors
    actors = kind(_plan(state, lag), 2, env_seeds(3, 4), model, 0)
    versions = {0: copy.deepcopy(model)}
    try:
        for j in range(6):
            taken = actors.take()
            assert taken.version == max(0, j - lag)
            obs = torch.as_tensor(taken.arrays["obs"], dtype=torch.float32).reshape(-1, 4)
            values = taken.arrays["values"].reshape(-1)
            with torch.no_grad():
                for v, weights in versions.items():
                    same = np.allclose(weights.value(obs).numpy(), values, atol=1e-6)
                    assert same == (v == taken.version), (j, v)
            _moved(model, j + 1)
            actors.publish(model, j + 1)
            versions[j + 1] = copy.deepcopy(model)
    finally:
        actors.close()


def test_the_actor_processes_collect_what_their_serial_twin_does() -> None:
    torch.set_num_threads(1)
    collected = []
    for kind in (RolloutActors, InlineActors):
        state = _state(4)
        model = state.learner.model
        actors = kind(_plan(state, 1), 2, env_seeds(3, 4), model, 0)
        rollouts = []
        try:
            for j in range(4):
                rollouts.append(actors.take().arrays)
                _moved(model, j + 1)
                actors.publish(model, j + 1)
        finally:
            actors.close()
        collected.append(rollouts)
    for ours, twins in zip(*collected, strict=True):
        assert ours.keys() == twins.keys()
        for key in ours:
            np.testing.assert_array_equal(ours[key], twins[key], err_msg=key)


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_lag_zero_gives_the_serial_loops_weights(env: str, tmp_path: Path) -> None:
    """With --policy-lag 0 the actor waits for every update: the serial loop's run,
    in another process; Pendulum's normalisation statistics travel with the weights."""
    torch.set_num_threads(1)
    runs = {"serial": {}, "async": {"policy_lag": 0}}
    for mode, extra in runs.items():
        config = {**SMALL, "env": env, "mode": mode, "seed": 4, **extra}
        train(PPOConfig(run_dir=tmp_path / mode, **config))  # type: ignore[arg-type]
    serial, lagged = final_model(tmp_path / "serial"), final_model(tmp_path / "async")
    assert serial.keys() == lagged.keys()
    for key in serial:
        torch.testing.assert_close(lagged[key], serial[key], rtol=1e-5, atol=1e-6, msg=key)


def test_a_lagged_run_is_reproducible_and_logs_its_lag(tmp_path: Path) -> None:
    """Two seeded runs with --policy-lag 1 and their threads held end with the same
    weights (which version acts is not a matter of timing, nor, with a count given,
    the update's threads: `LentCores`); metrics.csv, a row per rollout, has the lag
    of each: 0 for the first rollout, then 1."""
    for name in ("a", "b"):
        config = {**SMALL, "mode": "async", "seed": 6, "log_every_s": 0.0, "learner_threads": 1}
        train(PPOConfig(run_dir=tmp_path / name, **config))  # type: ignore[arg-type]
    a, b = final_model(tmp_path / "a"), final_model(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    with (tmp_path / "a" / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(float(r["policy_lag"])) for r in rows] == [0] + [1] * (len(rows) - 1)
    assert len(rows) == 1_024 // (16 * 4)
    for row in rows:
        assert 0.0 <= float(row["actor_busy"]) <= 1.0
        assert 0.0 < float(row["learner_busy"]) <= 1.0


def test_a_killed_actor_is_reported_with_its_index_not_waited_for() -> None:
    state = _state(4)
    actors = RolloutActors(_plan(state, 1), 2, env_seeds(3, 4), state.learner.model, 0)
    try:
        actors.take()
        pids = actors.group.pids
        os.kill(pids[1], signal.SIGKILL)
        start = time.monotonic()

        def next_rollouts() -> None:
            for j in range(3):  # at most the segments already in its outbox
                actors.publish(state.learner.model, j + 1)
                actors.take()

        with pytest.raises(WorkerError) as failed:
            next_rollouts()
        assert failed.value.worker == 1
        assert time.monotonic() - start < 10.0
    finally:
        actors.close()
    assert alive_after(pids) == []


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"vtrace": True, "mode": "sync"}, "--vtrace"),
        ({"policy_lag": -1, "mode": "async"}, "--policy-lag"),
        ({"act_device": "cuda", "mode": "async"}, "--act-device cuda"),
    ],
)
def test_bad_async_options_are_refused_in_one_line(extra: dict, says: str) -> None:
    with pytest.raises(UsageError, match=says) as refused:
        PPOConfig(env=ENV, **extra).validate()
    assert "\n" not in str(refused.value)


def test_ctrl_c_stops_the_actors_and_leaves_nothing(tmp_path: Path) -> None:
    # no evaluation child (`--eval-in inline`): test_ppo.py's Ctrl-C has one
    ctrl_c_train(tmp_path / "run", "ppo", "--mode", "async", "--eval-in", "inline")


def test_vtrace_relabels_every_rollout_and_a_resume_drops_the_one_in_flight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--vtrace logs its importance weights (near 1: one rollout of lag moves the policy
    little); `--resume` goes on from the checkpoint's weights, saying that the rollout
    the actors had collected past it was not learned from."""
    run = tmp_path / "run"
    config = {**SMALL, "mode": "async", "vtrace": True, "log_every_s": 0.0, "progress": "plain"}
    train(PPOConfig(run_dir=run, **config))  # type: ignore[arg-type]
    with (run / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    rhos = [float(r["vtrace_rho"]) for r in rows]
    assert all(0.5 < rho < 2.0 for rho in rhos), rhos
    assert float(rows[0]["vtrace_clipped"]) == 0.0  # the first rollout is on-policy
    assert "rollouts in flight" in capsys.readouterr().err
    assert main(["train", "--resume", str(run), "--total-steps", "2048"]) == 0
    assert "rollouts in flight" in capsys.readouterr().err
    state = checkpoint.load(run / "checkpoints" / "final.pt")
    assert state["env_steps"] >= 2_048


@pytest.mark.parametrize(("cores", "measured", "mode"), [
    (2, "serial", "async"), (1, "serial", "serial"), (2, "sync", "sync"), (16, "serial", "async"),
])  # fmt: skip
def test_auto_overlaps_cheap_envs_with_the_update_where_there_is_a_second_core(
    cores: int, measured: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Envs cheap enough to step in this process (the serial-or-sync measurement says
    serial) go to actor processes on a machine of 2 cores or more, the learner keeping
    one; expensive ones stay on sync workers; one core stays serial."""
    from pararl.runners import ppo as ppo_runner
    from pararl.runners.ppo_mode import ModeChoice

    monkeypatch.setattr(ppo_runner, "physical_cores", lambda: cores)
    chosen = ModeChoice(measured, 4e-6, "env step 4.0 µs x 8 envs")
    monkeypatch.setattr(ppo_runner, "choose_mode", lambda *args, **kwargs: chosen)
    layout = ppo_runner.choose(PPOConfig(env=ENV))
    assert (layout.mode, layout.num_envs) == (mode, 8)
    if mode == "async":
        assert layout.workers == {2: 1, 16: 8}[cores]  # the most of cores - 1 that split 8
        assert "env step 4.0 µs x 8 envs" in layout.choice.reason


@pytest.mark.parametrize(("update_s", "mode"), [(2.0, "async"), (0.01, "sync")])
def test_auto_overlaps_expensive_envs_where_the_update_outweighs_the_acting(
    update_s: float, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Envs for sync workers (Pong: a step of ~230 µs): `auto` times an iteration's
    sides and runs async where its iteration is the shorter (a large update), else
    sync (a small one); it says both estimates. Nothing is timed where `auto` was not
    asked for, for what it keeps out of async, or where `--workers` was given."""
    from pararl.runners import ppo as ppo_runner
    from pararl.runners.ppo_mode import LoopSides, ModeChoice, Threads

    monkeypatch.setattr(ppo_runner, "physical_cores", lambda: 2)
    chosen = ModeChoice("sync", 2.3e-4, "env step 230.0 µs x 8 envs")
    monkeypatch.setattr(ppo_runner, "choose_mode", lambda *args, **kwargs: chosen)
    monkeypatch.setattr(ppo_runner, "round_trip_s", lambda: 1.5e-4)
    asked = []

    def sides(env_fn: Any, num_envs: int, step_s: float, actors: int, workers: int) -> Any:
        asked.append((num_envs, step_s, actors, workers))
        timed = LoopSides(128, 0.5, 0.24, update_s, 0.6 * update_s, 0.6 * update_s)
        return timed, Threads(1, 2, 2)

    layout = ppo_runner.choose(PPOConfig(env=ENV), False, sides)
    assert (layout.mode, layout.num_envs) == (mode, 8)
    assert asked == [(8, 2.3e-4, 1, 2)]
    reason = layout.choice.reason
    assert reason.startswith("env step 230.0 µs x 8 envs; a rollout acted in 0.50 s on one core")
    assert f"an update {update_s:.2f} s on 1 thread, {0.6 * update_s:.2f} s on 2" in reason
    assert "s async, ~" in reason
    for config, continuous in [
        (PPOConfig(env=ENV, mode="sync"), False),
        (PPOConfig(env=ENV), True),
        (PPOConfig(env=ENV, recurrent="lstm"), False),
        (PPOConfig(env=ENV, workers=2), False),  # workers shaped for sync stay so
    ]:
        assert ppo_runner.choose(config, continuous, sides).mode == "sync"
    assert len(asked) == 1
    given = ppo_runner.choose(PPOConfig(env=ENV, workers=2), False, sides).choice.reason
    assert given.endswith("; --workers given: sync, not timed against async")


def test_auto_times_a_runs_own_iteration_and_keeps_sync_where_acting_outweighs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's own timer (a state of its settings acting its envs): envs of 1 ms a
    step under a network of 16 units act far longer than its update, so sync stays,
    and the reason saved says both estimates."""
    from pararl.runners import ppo as ppo_runner

    monkeypatch.setattr(ppo_runner, "physical_cores", lambda: 2)
    # a round trip as a quiet 2-core machine measures it (a busy moment's would
    # weigh on sync's estimate)
    monkeypatch.setattr(ppo_runner, "round_trip_s", lambda: 1.5e-4)
    run = tmp_path / "r"
    small = {**SMALL, "workers": None, "envs_per_worker": None, "num_envs": 4, "total_steps": 256}
    env = {"env": "pararl/StepCost-v0", "env_kwargs": {"cost_us": 1000.0}}
    train(PPOConfig(run_dir=run, **env, **small))  # type: ignore[arg-type]
    resolved = json.loads((run / "config.json").read_text())["resolved"]
    assert resolved["mode"] == "sync"
    assert "; a rollout acted in " in resolved["mode_reason"]
    assert "s async, ~" in resolved["mode_reason"]


@pytest.mark.parametrize(
    ("recurrent", "continuous", "kept"),
    [("lstm", False, "a recurrent policy"), ("none", True, "a Gaussian policy")],
)
def test_auto_keeps_what_learns_worse_a_rollout_behind_out_of_async(
    recurrent: str, continuous: bool, kept: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cheap envs on 2 cores, where a feed-forward policy of discrete actions goes
    async: a recurrent one (a rollout of lag lost solved policies late in the
    benchmark) and a Gaussian one (Pendulum and HalfCheetah learned less per step and
    per second) stay serial, and say why; --mode async is still there to ask for."""
    from pararl.runners import ppo as ppo_runner
    from pararl.runners.ppo_mode import ModeChoice

    monkeypatch.setattr(ppo_runner, "physical_cores", lambda: 2)
    chosen = ModeChoice("serial", 4e-6, "env step 4.0 µs x 8 envs")
    monkeypatch.setattr(ppo_runner, "choose_mode", lambda *args, **kwargs: chosen)
    layout = ppo_runner.choose(PPOConfig(env=ENV, recurrent=recurrent), continuous)  # type: ignore[arg-type]
    assert layout.mode == "serial"
    assert f"{kept} trains without async's policy lag" in layout.choice.reason
    asked = ppo_runner.choose(PPOConfig(env=ENV, recurrent=recurrent, mode="async"), continuous)  # type: ignore[arg-type]
    assert asked.mode == "async"


def test_vtrace_or_a_policy_lag_where_there_is_no_lag_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pararl.runners import ppo as ppo_runner
    from pararl.runners.ppo_mode import ModeChoice

    chosen = ModeChoice("sync", 1e-3, "env step 1,000 µs x 8 envs")
    monkeypatch.setattr(ppo_runner, "choose_mode", lambda *args, **kwargs: chosen)
    with pytest.raises(UsageError, match="--mode auto chose sync here") as refused:
        train(PPOConfig(run_dir=tmp_path / "run", vtrace=True, **SMALL))  # type: ignore[arg-type]
    assert "\n" not in str(refused.value)
    # nor is a policy lag other than the default, which no other mode has
    for mode, said in (
        ("auto", "--mode auto chose sync here"),
        ("sync", "--mode sync has none"),
    ):
        with pytest.raises(
            UsageError, match=f"--policy-lag 2 sets .*, and {said}; add --mode async"
        ):
            train(PPOConfig(run_dir=tmp_path / mode, mode=mode, policy_lag=2, **SMALL))  # type: ignore[arg-type]
        assert not (tmp_path / mode).exists()
    agents = PPOConfig(run_dir=tmp_path / "batch", mode="sync", policy_lag=2, seeds=2, **SMALL)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"--policy-lag 2 sets .*--mode sync has none"):
        train(agents)


@pytest.mark.parametrize("mode", ["serial", "sync"])
def test_the_default_policy_lag_given_where_there_is_none_is_refused(
    mode: str, tmp_path: Path, pararl: Any
) -> None:
    """`--policy-lag 1` is the default, yet given on the command line to a run that
    has no lag it would go unused: refused like any other value."""
    run = tmp_path / "r"
    result = pararl("train", "ppo", "--env", ENV, "--mode", mode, "--policy-lag", "1",
                    "--run-dir", str(run))  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"pararl: error: --policy-lag 1 sets the policy lag of --mode async, and --mode {mode} "
        "has none; add --mode async, or drop --policy-lag"
    )
    assert not run.exists()


def test_the_update_takes_the_actors_cores_while_they_wait(tmp_path: Path) -> None:
    """With --policy-lag 0 the actors wait for every update, so each update runs on
    every core (`LentCores`); a count given with --learner-threads holds."""
    cores = every_core_threads()
    if cores < 2:
        pytest.skip("needs 2 cores")
    for name, extra in {"lent": {}, "held": {"learner_threads": 1}}.items():
        config = {**SMALL, "mode": "async", "policy_lag": 0, "log_every_s": 0.0, **extra}
        train(PPOConfig(run_dir=tmp_path / name, **config))  # type: ignore[arg-type]
        with (tmp_path / name / "metrics.csv").open() as f:
            threads = {float(r["update_threads"]) for r in csv.DictReader(f)}
        assert threads == ({float(cores)} if name == "lent" else {1.0}), name


def test_a_policy_lag_as_long_as_the_budget_is_said_at_start() -> None:
    from pararl.runners import ppo as ppo_runner
    from pararl.runners.ppo_mode import ModeChoice

    env = gym.make("CartPole-v1")
    spaces = env.observation_space, env.action_space
    layout = ppo_runner.Layout(ModeChoice("async", None, "asked for"), 1, 8)  # 8 envs

    def note(lag: int, steps: int, done: int = 0) -> tuple[str, ...]:
        cfg = PPOConfig(mode="async", policy_lag=lag, total_steps=steps).for_spaces(*spaces)
        return ppo_runner._lag_note(cfg.config, layout, done)

    # CartPole's rollouts: 8 envs x 32 steps = 256; 3,000 steps hold 11 of them
    assert "--policy-lag 100 is as many rollouts as the budget has left (11" in note(100, 3_000)[0]
    assert note(1, 3_000) == ()
    assert note(2, 50_000) == ()
    assert note(2, 50_000, done=49_800)  # resumed near its end: none left
