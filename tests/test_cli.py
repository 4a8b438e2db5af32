"""Bad input: one line on stderr, exit code 2, nothing already saved is lost.

Run in this process through `pararl.cli.main` (what the `pararl` program calls),
not in a new interpreter each: the same code path, a second less per case."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["train", "dqn", "--env", "NoSuchEnv-v0"], "unknown env id"),
        (["train", "dqn", "--env", "Pendulum-v1"], "DQN takes Discrete actions"),
        (["train", "dqn", "--lr", "-1"], "--lr must be > 0"),
        (["train", "dqn", "--learner-threads", "-1"], "--learner-threads must be >= 0"),
        (["train", "dqn", "--seed", "-1"], "--seed must be >= 0"),
        (["train", "sac", "--lr", "inf"], "--lr must be a finite number, not inf"),
        (["train", "ppo", "--target-return", "nan"], "--target-return must be a finite number"),
        (["train", "dqn", "--trust-checkpoint"], "use it with --resume"),
        (["evaluate", "/nonexistent/run"], "not a pararl run directory"),
        (["train", "--resume", "/nonexistent/run"], "no config.json"),
        (["nonsense"], "unknown command"),
        (["train", "--resume"], "--resume needs a run directory"),
        (["train", "dqn", "--mode", "serial", "--replay-ratio", "0"], "needs --mode async"),
        (["train", "ppo", "--workers", "3"], "8 envs do not split evenly over --workers 3"),
        (["train", "ppo", "--device", "cuda"], "Unrecognized options: --device"),
        (["train", "ppo", "--hidden"], "--hidden needs at least one width"),
        (["train", "ppo", "--lr", "3e-4", "1e-3"], "give --sweep lr=3e-4,1e-3"),
        (["train", "sac", "--seeds", "2"], "does not train several agents in one run yet"),
        (
            ["train", "ppo", "--seeds", "2", "--mode", "async", "--workers", "2"],
            "a batch in --mode async steps every agent's envs in one actor process",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], expect: str, tmp_path: Path, pararl: Any
) -> None:
    result = pararl(
        *args, *(["--run-dir", str(tmp_path / "r")] if args[:2] == ["train", "dqn"] else [])
    )
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert expect in lines[0], result.stderr


def test_bad_option_type_exits_2(pararl: Any) -> None:
    result = pararl("train", "dqn", "--total-steps", "many")
    assert result.returncode == 2


def test_a_saved_run_given_the_wrong_options_or_a_corrupt_checkpoint(
    tmp_path: Path, pararl: Any
) -> None:
    from pararl import DQNConfig, train

    run = tmp_path / "run"
    train(
        DQNConfig(
            mode="serial",
            run_dir=run,
            total_steps=300,
            learning_starts=100,
            eval_every=300,
            eval_episodes=1,
            tensorboard=False,
            progress="none",
            workers=1,
            envs_per_worker=1,
            hidden=(8,),
            batch_size=8,
        )
    )
    for args, expect in [
        (["evaluate", str(run), "--tasks", "3"], "--tasks: for MAML runs"),
        (["train", "ppo", "--resume", str(run)], "is a DQN run, not PPO; resume it with"),
    ]:
        result = pararl(*args)
        assert result.returncode == 2, result.stderr
        assert expect in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    best = run / "checkpoints" / "best.pt"
    best.write_bytes(b"not a checkpoint")
    result = pararl("evaluate", str(run))
    assert result.returncode == 2
    assert "corrupt" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert (run / "checkpoints" / "final.pt").is_file()  # the rest is untouched


def test_a_run_whose_config_json_is_broken(tmp_path: Path, pararl: Any) -> None:
    """`pararl evaluate` and `--resume` read the run's config.json before anything
    else of it: a broken one is one line naming it, and the file stays as it was."""
    import json

    from pararl import DQNConfig
    from pararl.config import to_json

    run = tmp_path / "run"
    run.mkdir()
    path = run / "config.json"
    good = json.loads(to_json(DQNConfig(run_dir=run), {"resolved": {"env_kind": "discrete"}}))
    # a sound config.json: read, then what comes after it is missing (no checkpoints)
    path.write_text(json.dumps(good))
    result = pararl("evaluate", str(run))
    assert result.returncode == 2, result.stderr
    assert "has no checkpoint 'best'" in result.stderr, result.stderr
    for text, expect in [
        (json.dumps(good)[:100], "is not valid JSON"),
        (json.dumps(good | {"lrr": 0.1}), '"lrr" is not a field of DQNConfig'),
        (json.dumps(good | {"total_steps": "lots"}), "total_steps must be an integer or null"),
        (json.dumps(good | {"total_steps": -5}), "--total-steps must be > 0"),
    ]:
        path.write_text(text)
        for args in (["evaluate", str(run)], ["train", "--resume", str(run)]):
            result = pararl(*args)
            assert result.returncode == 2, result.stderr
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            assert len(lines) == 1, result.stderr
            assert f"{path}" in lines[0], lines[0]
            assert expect in lines[0], lines[0]
            assert path.read_text() == text
    assert sorted(p.name for p in run.iterdir()) == ["config.json"]


def test_usage_lists_every_command_without_importing_torch() -> None:
    code = (
        "import sys; from pararl.cli import COMMANDS, main; rc = main(['--help']); "
        "print('torch' in sys.modules, rc)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    *usage, verdict = result.stdout.splitlines()
    assert verdict == "False 0", result.stdout + result.stderr
    from pararl.cli import COMMANDS

    for key in COMMANDS:
        assert any(line.split()[1 : 1 + len(key)] == list(key) for line in usage if line.strip())


def test_help_into_a_closed_pipe_ends_without_a_traceback() -> None:
    """`pararl train dqn --help | head`: the reader is gone before the help is written."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pararl.cli", "train", "dqn", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # before the interpreter has started: every write finds no reader
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert proc.returncode == 1
