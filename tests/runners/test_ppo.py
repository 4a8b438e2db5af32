"""PPO runs end to end: reproducible, discrete and continuous, devices, failures."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl import PPOConfig, checkpoint, evaluate, train
from pararl.algos.ppo import PPOLearner, load_policy
from pararl.cli import main
from pararl.config.saved import saved_config, saved_facts
from pararl.devices import choose_devices
from pararl.envs.make import env_factory
from pararl.errors import UsageError
from pararl.evaluation.episodes import Evaluator, eval_seeds
from pararl.models import ActorCritic
from pararl.mp import threads as threads_rules
from pararl.rundir import RunDir
from pararl.runners import ppo as ppo_runner
from pararl.runners.session import TrainSession
from tests.busy_cores import BusyCores, assert_moved_to_one
from tests.procs import ctrl_c_train

SMALL = dict(
    total_steps=1_024,
    num_steps=16,
    minibatch_size=64,
    update_epochs=2,
    eval_every=512,
    eval_episodes=2,
    tensorboard=False,
    progress="none",
    hidden=(16,),
    workers=1,
    envs_per_worker=4,
    target_return=10_000.0,
    eval_in="inline",  # no evaluation child to start: these tests do not check it
)


def final_model(run: Path) -> dict[str, torch.Tensor]:
    state = checkpoint.load(run / "checkpoints" / "final.pt")
    return state["learner"]["model"]


def test_serial_is_bit_for_bit_reproducible(tmp_path: Path) -> None:
    for name in ("a", "b"):
        train(PPOConfig(mode="serial", seed=5, run_dir=tmp_path / name, **SMALL))  # type: ignore[arg-type]
    a, b = final_model(tmp_path / "a"), final_model(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("given", [0, 2])
def test_a_large_networks_update_leaves_a_second_thread_that_is_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: int
) -> None:
    """A network of 1M+ parameters updates on every core while the envs wait; when
    updates on two threads run slower than on one (as beside another run on the same
    cores: made so here, deterministically), the update drops to one at the next
    rollout, and metrics.csv says so; acting keeps its own count throughout. A count
    given with --learner-threads holds."""
    updating: list[int] = []
    acting: list[int] = []
    real_update, real_collect = PPOLearner.update, ppo_runner.collect

    def update(self: PPOLearner, batch: Any, rng: Any, **kwargs: Any) -> dict[str, float]:
        updating.append(torch.get_num_threads())
        return real_update(self, batch, rng, **kwargs)

    def collect(*args: Any, **kwargs: Any) -> Any:
        acting.append(torch.get_num_threads())
        return real_collect(*args, **kwargs)

    monkeypatch.setattr(PPOLearner, "update", update)
    monkeypatch.setattr(ppo_runner, "collect", collect)
    monkeypatch.setattr(ppo_runner, "AdaptiveThreads", BusyCores)
    monkeypatch.setattr(threads_rules, "every_core_threads", lambda given=0: given or 2)
    monkeypatch.setattr(threads_rules, "SMALL_MODEL_PARAMS", 0)  # SMALL's network counts as large
    run = tmp_path / "run"
    config = {**SMALL, "eval_every": 10**9, "learner_threads": given, "log_every_s": 0.0}
    train(PPOConfig(mode="serial", seed=0, run_dir=run, **config))  # type: ignore[arg-type]
    with (run / "metrics.csv").open() as f:
        logged = [int(float(row["update_threads"])) for row in csv.DictReader(f)]
    assert logged == updating  # a row per rollout: the count its update ran with
    assert set(acting) == {saved_facts(run)["learner_threads"]}
    if given:
        assert set(updating) == set(acting) == {2}
    else:
        assert_moved_to_one(updating)


@pytest.mark.parametrize(("env", "mode"), [("CartPole-v1", "sync"), ("Pendulum-v1", "serial")])
def test_discrete_and_continuous_train(tmp_path: Path, env: str, mode: str) -> None:
    run, discrete = tmp_path / "run", env == "CartPole-v1"
    session = train(PPOConfig(env=env, mode=mode, run_dir=run, **SMALL))  # type: ignore[arg-type]
    state = checkpoint.load(session.run.checkpoint("final"))
    # 16 rollouts of 16 steps x 4 envs, each 2 epochs of one minibatch of 64
    assert (state["env_steps"], state["learner"]["updates"]) == (1_024, 32)
    assert (state["discrete"], state["action_dim"]) == ((True, 2) if discrete else (False, 1))
    # `pararl evaluate`'s return is the final policy's own, played here by hand on the
    # episodes of a run's first evaluation
    result = evaluate(run, episodes=2, checkpoint="final")
    policy = load_policy(saved_config(run), state)  # type: ignore[arg-type]
    returns = []
    with gym.make(env) as played:
        for episode_seed in eval_seeds(12_345, 2, (0,)):
            obs, _ = played.reset(seed=episode_seed)
            total, ended = 0.0, False
            while not ended:
                action = policy.greedy(obs[None].astype(np.float32))[0]
                action = action if discrete else np.clip(action, -2.0, 2.0)
                obs, reward, terminated, truncated, _ = played.step(action)
                total, ended = total + float(reward), terminated or truncated
            returns.append(total)
    assert (result["episodes"], result["truncated"]) == (2, 2 * (not discrete))
    assert result["mean"] == pytest.approx(np.mean(returns), rel=1e-4)


def test_resume_keeps_its_envs_and_its_best_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    monkeypatch.setattr("pararl.runners.ppo.physical_cores", lambda: 1)  # --workers auto: 1
    train(PPOConfig(mode="serial", run_dir=run, **{**SMALL, "workers": None}))  # type: ignore[arg-type]
    monkeypatch.setattr("pararl.runners.ppo.physical_cores", lambda: 3)  # resumed elsewhere
    assert main(["train", "--resume", str(run), "--total-steps", "2048"]) == 0
    state = checkpoint.load(run / "checkpoints" / "final.pt")
    assert state["env_steps"] >= 2_048
    assert saved_facts(run)["num_envs"] == 4  # its batch's envs, not 3 workers' 12
    window = checkpoint.load(run / "checkpoints" / "final.pt")["episode_returns"]
    assert 0 < len(window) <= 20

    # a resumed run keeps its best evaluation: `best` is not replaced by a poorer one
    evals = (run / "eval.csv").read_text().splitlines()
    header, first = evals[0].split(","), evals[1].split(",")
    first[header.index("eval_return")] = "1000000.0"  # as if its first had been the best
    (run / "eval.csv").write_text("\n".join([evals[0], ",".join(first), *evals[2:]]) + "\n")
    best = (run / "checkpoints" / "best.pt").read_bytes()
    assert main(["train", "--resume", str(run), "--total-steps", "3072"]) == 0
    assert "(best eval 1000000.0)" in capsys.readouterr().err
    assert (run / "checkpoints" / "best.pt").read_bytes() == best
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--total-steps", "4096", "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "--workers 2: this run learns from 4 envs (1 workers x 4)" in err, err


def test_default_envs_do_not_follow_the_cores_and_a_resume_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    small = {k: v for k, v in SMALL.items() if k not in ("workers", "envs_per_worker")}
    small["num_steps"] = 8  # 8 envs x 8 steps: a rollout of 64, one minibatch
    monkeypatch.setattr("pararl.runners.ppo.physical_cores", lambda: 2)
    train(PPOConfig(mode="sync", run_dir=run, **small))  # type: ignore[arg-type]
    assert (saved_facts(run)["num_envs"], saved_facts(run)["workers"]) == (8, 2)
    monkeypatch.setattr("pararl.runners.ppo.physical_cores", lambda: 16)  # resumed elsewhere
    assert main(["train", "--resume", str(run), "--total-steps", "2048"]) == 0
    assert (saved_facts(run)["num_envs"], saved_facts(run)["workers"]) == (8, 8)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--total-steps", "3072", "--workers", "3"]) == 2
    err = capsys.readouterr().err
    assert "--workers 3: this run learns from 8 envs" in err, err


def test_resumed_session_goes_on_with_its_episode_window_and_evaluations(tmp_path: Path) -> None:
    cfg = PPOConfig(**SMALL).for_env("discrete").config  # type: ignore[arg-type]
    run = RunDir.new(tmp_path, "ppo", "CartPole-v1")
    run.evaluations.write_text(
        "env_steps,wall_s,eval_return\n100,1.0,50.0\n200,2.0,80.0\n300,3.0,60.0\n400,4.0,99.0\n"
    )
    evaluator = Evaluator(env_factory("CartPole-v1"), 1, seed=0)
    session = TrainSession(
        cfg, run, evaluator, None, start_steps=300, start_wall=3.0, recent_returns=[9.0, 11.0]
    )
    try:
        assert (session.best_eval, session.last_eval) == (80.0, 60.0)  # not the row past 300
        assert list(session.episode_returns) == [9.0, 11.0]
        assert session.log(310, 1, None)["episode_return"] == 10.0
        session.finish(310, dict, "interrupted")
    finally:
        session.close()
    state = torch.load(run.checkpoint("interrupted"), weights_only=True)  # no header here
    assert state["episode_returns"] == [9.0, 11.0]


def test_device_choice_without_cuda_is_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def make() -> ActorCritic:
        return ActorCritic(4, 2, True, (8,))

    choice = choose_devices(make, 4, 8, 32, "auto", "auto")
    assert choice.act.type == "cpu"
    assert choice.learn.type == "cpu"
    assert "only the CPU" in choice.reason
    with pytest.raises(UsageError, match="CUDA is not available"):
        choose_devices(make, 4, 8, 32, "cpu", "cuda")


def test_bad_input_exit_2(tmp_path: Path, pararl: Any) -> None:
    for args in (
        ["train", "ppo", "--env", "Nope-v9"],
        ["train", "ppo", "--gae-lambda", "2"],
        ["train", "ppo", "--act-device", "cuda"]
        if not torch.cuda.is_available()
        else ["train", "ppo", "--num-steps", "0"],
    ):
        result = pararl(*args, "--run-dir", str(tmp_path / "r"))
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_ctrl_c_saves_and_leaves_nothing(tmp_path: Path) -> None:
    err = ctrl_c_train(tmp_path / "run", "ppo", "--mode", "sync", "--workers", "2")
    # one line says how it ended, how far it got and where it is saved; no second one
    assert "pararl: interrupted after " in err


def test_an_update_cut_by_ctrl_c_does_not_count_its_rollout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C in the middle of the second rollout's update: the checkpoint holds the
    first rollout's steps (the cut one's are collected again on resume), and the run
    says so."""
    step = PPOLearner._minibatch_step
    calls = [0]

    def cut(self: PPOLearner, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 3:  # the second rollout's update: 2 steps an update (64 of 64 rows)
            raise KeyboardInterrupt
        return step(self, *args, **kwargs)

    monkeypatch.setattr(PPOLearner, "_minibatch_step", cut)
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train(PPOConfig(mode="serial", run_dir=run, **{**SMALL, "progress": "plain"}))  # type: ignore[arg-type]
    saved = checkpoint.load(run / "checkpoints" / "interrupted.pt")
    assert saved["env_steps"] == 64  # one rollout of 16 steps of 4 envs
    assert "its rollout's 64 steps are not counted" in capsys.readouterr().err


def test_a_first_update_cut_by_ctrl_c_promises_no_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cut in its first update, a new run keeps nothing: it says so, and not that a
    resume would collect the rollout again."""

    def cut(self: PPOLearner, *args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(PPOLearner, "_minibatch_step", cut)
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train(PPOConfig(mode="serial", run_dir=run, **{**SMALL, "progress": "plain"}))  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "before its first iteration; nothing saved" in err
    assert "resume" not in err
    assert not run.exists()
