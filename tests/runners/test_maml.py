"""`pararl train maml` end to end on Navigation2D: adaptation pays off within a few
iterations, the run directory, resume, evaluate, bad input, Ctrl-C."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from pararl import checkpoint, train
from pararl.algos.maml import MAMLLearner
from pararl.cli import main
from pararl.config import MAMLConfig
from pararl.mp import threads as threads_rules
from pararl.runners import maml as maml_runner
from tests.busy_cores import BusyCores, assert_moved_to_one
from tests.procs import alive_after, interrupt_training

NAV = "pararl/Navigation2D-v0"
SMALL = dict(
    env=NAV,
    meta_batch_size=8,
    fast_batch_size=8,
    episode_length=20,
    workers=1,
    progress="none",
    tensorboard=False,
)


def iterations(run: Path) -> list[dict[str, float]]:
    with (run / "metrics.csv").open() as f:
        return [
            {k: float(v) for k, v in r.items() if v} for r in csv.DictReader(f) if r["iteration"]
        ]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("maml") / "run"
    train(MAMLConfig(meta_iterations=5, seed=1, run_dir=run, **SMALL))  # type: ignore[arg-type]
    return run


def test_post_adaptation_return_rises_above_pre_adaptation(trained: Path) -> None:
    rows = iterations(trained)
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5]
    gaps = [r["post_return"] - r["pre_return"] for r in rows]
    assert all(g > 0 for g in gaps)
    assert gaps[-1] > gaps[0]  # meta-learning: one inner step gains more than at the start
    for r in rows:
        assert 0 < r["kl"] <= 0.01
        assert r["step_accepted"] == 1
        assert 1 <= r["ls_steps"] <= 15
        assert min(r["time_sampling_s"], r["time_adaptation_s"], r["time_outer_s"]) > 0
    state = checkpoint.load(trained / "checkpoints" / "final.pt")
    assert state["iteration"] == 5
    assert state["env_steps"] == 5 * 8 * 8 * 20 * 2
    # every meta-iteration's returns are its evaluation: none skipped, whatever
    # --eval-every (1 env step by default) says is due between them
    with (trained / "eval.csv").open() as f:
        evaluated = list(csv.DictReader(f))
    assert len(evaluated) == 5
    assert {r["eval_skipped"] for r in evaluated} == {"0"}


@pytest.mark.parametrize("given", [0, 2])
def test_the_outer_step_leaves_a_second_thread_that_is_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: int
) -> None:
    """The outer step takes every core while the env workers wait; when it runs slower
    on two threads than on one (made so here, deterministically), it drops to one from
    the next meta-iteration, and metrics.csv says so. A count given with
    --learner-threads holds."""
    threads_seen: list[int] = []
    real_step = MAMLLearner._step

    def step(self: MAMLLearner, batch: Any) -> dict[str, float]:
        threads_seen.append(torch.get_num_threads())
        return real_step(self, batch)

    monkeypatch.setattr(MAMLLearner, "_step", step)
    monkeypatch.setattr(maml_runner, "AdaptiveThreads", BusyCores)
    monkeypatch.setattr(threads_rules, "every_core_threads", lambda given=0: given or 2)
    run = tmp_path / "run"
    n = 3 if given else 8  # a count not held drops to one from the second iteration on
    config = MAMLConfig(meta_iterations=n, seed=1, run_dir=run, learner_threads=given, **SMALL)  # type: ignore[arg-type]
    train(config)
    assert [int(r["learner_threads"]) for r in iterations(run)] == threads_seen
    if given:
        assert set(threads_seen) == {2}
    else:
        assert_moved_to_one(threads_seen)


def test_resume_and_evaluate(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "evaluate",
                str(trained),
                "--tasks",
                "2",
                "--episodes",
                "2",
                "--adapt-steps",
                "2",
                "--checkpoint",
                "final",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[1].strip() for line in lines] == [
        "before adaptation",
        "after 1 step",
        "after 2 steps",
    ]
    # Navigation2D draws no frames: --video is refused before any episode runs
    assert main(["evaluate", str(trained), "--video", str(trained / "x.gif")]) == 2
    more = 6 * 8 * 8 * 20 * 2
    assert main(["train", "--resume", str(trained), "--total-steps", str(more)]) == 0
    assert [r["iteration"] for r in iterations(trained)] == [1, 2, 3, 4, 5, 6]
    # or by meta-iterations, which set the budget as --total-steps does
    assert main(["train", "--resume", str(trained), "--meta-iterations", "7"]) == 0
    assert [r["iteration"] for r in iterations(trained)] == [1, 2, 3, 4, 5, 6, 7]
    assert main(["train", "--resume", str(trained), "--meta-iterations", "7"]) == 0  # done
    assert [r["iteration"] for r in iterations(trained)][-1] == 7
    said = capsys.readouterr().err
    assert "--meta-iterations 7 (17,920 env steps) asks for no more; nothing to do" in said


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "Pendulum-v1"], "not a task env"),
        (["--meta-batch-size", "3", "--fast-batch-size", "1", "--workers", "2"], "spread evenly"),
        (["--fast-lr", "0"], "--fast-lr"),
        (["--max-kl", "-1"], "--max-kl"),
        (["--backend", "ray"], "Unrecognized options: --backend"),
        (["--wrapper", "cartpole-shaped"], "Unrecognized options: --wrapper"),
    ],
)
def test_bad_input_exits_2_and_leaves_no_run(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    base = ["train", "maml", "--env", NAV, "--run-dir", str(run), "--progress", "none"]
    assert main([*base, *args]) == 2
    assert message in capsys.readouterr().err
    assert not run.exists()


def test_help_lists_only_what_maml_uses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["train", "maml", "--help"])
    text = capsys.readouterr().out
    assert "--meta-batch-size" in text
    assert "--fast-lr" in text
    unused = ("--backend", "--ray-address", "--wrapper", "--eval-in", "--eval-episodes")
    for flag in (*unused, "--eval-max-steps"):
        assert flag not in text


@pytest.mark.slow
def test_ctrl_c_saves_and_leaves_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "pararl.cli",
        "train",
        "maml",
        "--env",
        NAV,
        "--run-dir",
        str(run),
        "--progress",
        "plain",
        "--meta-batch-size",
        "4",
        "--fast-batch-size",
        "4",
        "--episode-length",
        "20",
        "--workers",
        "1",
        "--no-tensorboard",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    children, err = interrupt_training(proc)
    assert proc.returncode == 130, err
    assert (run / "checkpoints" / "interrupted.pt").exists()
    assert not alive_after(children)
