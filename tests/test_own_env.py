"""A user's own env, as a new user brings one: a `module:EnvId` in the working
directory, a constructor without `render_mode` and with arguments of its own. It
trains through the console script, evaluates and resumes from elsewhere (its
metrics.csv and eval.csv in env-step order throughout), and the Python API builds it
without Gymnasium's override warning. The "Your own env" guide shows a command for
each space, a masked env and a factory (tests/test_docs.py runs them, and checks
the READMEs' copy of the factory against it)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pararl import DQNConfig, PPOConfig, load, train
from tests.conftest import UserModule

# evaluations in a child process: their results come back after later log rows
TINY = [
    "--total-steps", "800", "--learning-starts", "200", "--eval-every", "200",
    "--eval-episodes", "2", "--eval-in", "process", "--log-every-s", "0", "--mode", "serial",
    "--progress", "plain", "--no-tensorboard", "--checkpoint-every", "400",
]  # fmt: skip


@pytest.mark.slow
def test_console_script_trains_it_then_evaluate_and_resume_find_it(
    user_module: UserModule, tmp_path: Path, pararl: Any
) -> None:
    script = Path(sys.executable).parent / "pararl"
    if not script.is_file():
        pytest.skip("pararl is not installed as a console script here")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [str(script), "train", "dqn", "--env", user_module.env_id]
    done = subprocess.run(
        [*command, "--env-kwargs", "length=3", *TINY],
        cwd=user_module.directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    [run] = (user_module.directory / "runs").iterdir()
    assert run.name.startswith("dqn-corridor_env_Corridor-v0-")  # no ':' in a file name
    saved = json.loads((run / "config.json").read_text())
    assert saved["env_kwargs"] == {"length": 3}
    assert saved["resolved"]["env_module_dir"] == str(user_module.directory.resolve())
    assert saved["resolved"]["eval_max_steps"] == 40  # the env's own time limit

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)  # the fixture restores the working directory
    hidden = user_module.directory / "corridor_env.py"
    hidden.rename(hidden.with_suffix(".moved"))
    missing = pararl("evaluate", str(run))
    assert missing.returncode == 2
    assert len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    assert f"PYTHONPATH={user_module.directory.resolve()}" in missing.stderr
    hidden.with_suffix(".moved").rename(hidden)

    # the module a run names is said, with its file, before it runs; from the
    # directory the run names only when the run is trusted (a shared run is data)
    with hidden.open("a") as f:
        f.write("\nimport sys\nprint('corridor_env runs', file=sys.stderr)\n")
    notice = f"names env module 'corridor_env' (corridor_env:Corridor-v0): importing {hidden}"
    untrusted = pararl("evaluate", str(run), "--episodes", "2")
    assert untrusted.returncode == 2
    assert "corridor_env runs" not in untrusted.stderr
    assert "or add --trust-checkpoint to let pararl import it" in untrusted.stderr
    assert len(untrusted.stderr.strip().splitlines()) == 1, untrusted.stderr
    os.chdir(run)  # nor from a working directory inside the run
    assert pararl("evaluate", str(run), "--episodes", "2").returncode == 2
    os.chdir(user_module.directory)  # the user's own directory, where it was trained
    assert pararl("evaluate", str(run), "--episodes", "2").returncode == 0
    sys.modules.pop("corridor_env")
    os.chdir(elsewhere)
    evaluated = pararl("evaluate", str(run), "--episodes", "2", "--trust-checkpoint")
    assert evaluated.returncode == 0, evaluated.stderr
    assert "corridor_env:Corridor-v0: mean return" in evaluated.stdout
    assert 0 <= evaluated.stderr.find(notice) < evaluated.stderr.find("corridor_env runs")
    (run / "checkpoints" / "final.pt").unlink()  # as if killed: resume from step_N
    sys.modules.pop("corridor_env")  # a new process, as far as the module goes
    # the resumed run's evaluations inline: no second evaluation child to start
    resumed = pararl("train", "--resume", str(run), "--total-steps", "1200", "--eval-in", "inline",
                     "--trust-checkpoint")  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert 0 <= resumed.stderr.find(notice) < resumed.stderr.find("corridor_env runs")
    assert "resuming from checkpoints/step_800.pt: 800 env steps" in resumed.stderr
    assert load(run, "final").env_steps >= 1200
    # each in order through the resume, no row twice: metrics.csv by (env steps,
    # updates) (a learning-only row has more updates at the same steps), eval.csv by steps
    for name, key in (("metrics.csv", ("env_steps", "updates")), ("eval.csv", ("env_steps",))):
        with (run / name).open() as f:
            rows = [tuple(int(float(r[k])) for k in key) for r in csv.DictReader(f)]
        assert len(rows) >= 3, name
        assert rows == sorted(set(rows)), (name, rows)
        assert max(rows)[0] >= 1200, name


def test_env_kwargs_reach_the_env_and_bad_ones_are_one_line(
    user_module: UserModule, pararl: Any
) -> None:
    ok = pararl(
        "train", "ppo", "--env", user_module.env_id, "--env-kwargs", '{"length": 2}',
        "--total-steps", "512", "--eval-every", "512", "--eval-episodes", "1",
        "--mode", "serial", "--progress", "none", "--no-tensorboard", "--run-dir", "ppo",
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    agent = load("ppo")
    assert agent.env_kwargs == {"length": 2}
    assert agent.make_env().unwrapped.length == 2  # type: ignore[attr-defined]
    # its constructor takes no render_mode: a video of it is refused in one line
    video = pararl("evaluate", "ppo", "--episodes", "1", "--video", "corridor.gif")
    assert video.returncode == 2, video.stderr
    assert len(video.stderr.strip().splitlines()) == 1, video.stderr
    assert "render_mode='rgb_array'" in video.stderr
    assert not Path("corridor.gif").exists()

    for bad, named in (("width=3", "width"), ("{bad", "{bad"), ("=3", "=3")):
        result = pararl("train", "dqn", "--env", user_module.env_id, "--env-kwargs", bad)
        assert result.returncode == 2, (bad, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert named in result.stderr
    assert not Path("runs").exists()  # a refused start leaves no run directory


def test_python_api_builds_it_with_kwargs_and_without_override_warnings(
    user_module: UserModule, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A script that imports its env module (which registers the id) and trains on
    the id: the evaluation process gets the registration and imports the module
    itself, and Gymnasium has no cause to say the id was overridden."""
    monkeypatch.syspath_prepend(str(user_module.directory))  # `python train.py` has it
    import corridor_env  # noqa: F401  - registers Corridor-v0

    session = train(
        DQNConfig(
            env="Corridor-v0",
            env_kwargs={"length": 2},
            total_steps=600,
            learning_starts=100,
            eval_every=300,
            eval_episodes=2,
            eval_in="process",
            mode="serial",
            progress="none",
            tensorboard=False,
            run_dir=Path("api"),
        )
    )
    assert session is not None
    assert session.last_eval is not None
    err = capfd.readouterr().err
    assert "Overriding environment" not in err
    assert "render_mode" not in err
    with pytest.raises(ValueError, match="JSON values"):
        train(PPOConfig(env="Corridor-v0", env_kwargs={"length": object()}))


def own_env_guide() -> str:
    return (Path(__file__).parents[1] / "docs" / "guides" / "your-own-env.md").read_text()


def test_the_guide_shows_each_space_a_masked_env_and_a_factory() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", own_env_guide(), re.DOTALL)
    commands = " ".join(line for block in blocks for line in block.splitlines())
    for shown in ("FrozenLake-v1", "DictCue", "TupleCue", "MultiDiscreteTarget",
                  "MultiBinaryTarget", "MaskedChoice"):  # fmt: skip
        assert shown in commands, shown
    assert "env=make_env" in own_env_guide()


def test_a_run_of_an_id_registered_at_run_time_says_how_to_evaluate_it(
    tmp_path: Path, pararl: Any
) -> None:
    """Trained on an id its program registered (no module named): where nothing
    registers it, evaluate and resume say so and what to do, in one line."""
    import gymnasium as gym

    env_id = "pararl-tests/RegisteredHere-v0"
    gym.register(env_id, entry_point="gymnasium.envs.classic_control:CartPoleEnv")
    run = tmp_path / "run"
    try:
        train(PPOConfig(env=env_id, total_steps=256, num_steps=32, mode="serial",
                        eval_every=256, eval_episodes=1, progress="none",
                        tensorboard=False, run_dir=run))  # fmt: skip
    finally:
        del gym.registry[env_id]
    for args in (["evaluate", str(run), "--episodes", "1"],
                 ["train", "--resume", str(run), "--total-steps", "512"]):  # fmt: skip
        result = pararl(*args)
        assert result.returncode == 2, result.stderr
        line = result.stderr.strip()
        assert "\n" not in line
        assert f"unknown env id '{env_id}': {run} was trained where it was registered" in line
