"""Time to solve (`dqn`, `ppo`) and whole-process runs: the parsers on real output
formats, the harness on fake training processes (solved, unsolved, crashed, hung), the
commands of every system, and the real SB3 anchor on a tiny budget."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest
from benchmarks.lib.solve import SolveOptions
from benchmarks.lib.training import parse_evaluate, parse_final

from benchmarks.lib import sb3, solve, training

PARARL_STDERR = """pararl: DQN on CartPole-v1, mode async, learner on cpu, run dir /tmp/x
eval @ 5,120 steps (3.2 s): 180.0 ± 20.0
pararl: solved after 12,288 env steps in 21.5 s (best eval 500.0); run saved in /tmp/x
"""


def test_parsers_read_real_output_formats() -> None:
    assert parse_final(PARARL_STDERR) == {
        "status": "solved",
        "env_steps": 12288,
        "train_s": 21.5,
        "best_eval": 500.0,
    }
    unsolved = parse_final(
        "pararl: step budget reached after 1,000 env steps in 2.0 s (no evaluation); run saved"
    )
    assert unsolved is not None
    assert (unsolved["status"], unsolved["env_steps"], unsolved["best_eval"]) == (
        "step budget reached",
        1000,
        None,
    )
    assert parse_final("Traceback (most recent call last):\n  boom") is None
    out = "CartPole-v1: mean return 487.3 ± 12.1 over 20 episodes (best checkpoint of /tmp/x)\n"
    assert parse_evaluate(out) == pytest.approx(487.3)
    assert parse_evaluate("nothing here") is None
    both = 'noise\nsb3-dqn: {"mean": 1.0}\nsb3-ppo: {"mean": 2.0}\n'
    assert (sb3.parse(both, "dqn"), sb3.parse(both, "ppo")) == ({"mean": 1.0}, {"mean": 2.0})
    assert sb3.parse("sb3-dqn without the colon", "dqn") is None


def test_commands_of_every_system(tmp_path: Path) -> None:
    o = SolveOptions(budget=1_000, eval_every=500)
    averaging = " ".join(solve.train_command("pararl-averaging", 0, tmp_path, o, "dqn"))
    assert "--mode averaging --workers 2" in averaging
    ppo = solve.train_command("pararl", 3, tmp_path, o, "ppo")
    assert ppo[2:6] == ["pararl.cli", "train", "ppo", "--env"]
    assert "--mode" not in ppo  # `pararl` = the defaults
    assert ppo[ppo.index("--eval-every") + 1] == "500"
    assert solve.train_command("sb3", 3, tmp_path, o, "ppo")[2:5] == [
        "benchmarks.lib.sb3",
        "ppo",
        "train",
    ]
    assert solve.verify_command("sb3", tmp_path, o, "dqn")[2:5] == [
        "benchmarks.lib.sb3",
        "dqn",
        "verify",
    ]
    assert solve.verify_command("pararl", tmp_path, o, "ppo")[3] == "evaluate"


def _fake(stderr: str = "", stdout: str = "", code: int = 0, sleep: float = 0.0) -> list[str]:
    script = (
        f"import sys, time; time.sleep({sleep}); sys.stdout.write({stdout!r}); "
        f"sys.stderr.write({stderr!r}); sys.exit({code})"
    )
    return [sys.executable, "-c", script]


def test_solve_harness_on_fake_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Solved, unsolved, crashed and hung runs are told apart, and ratios follow."""
    trains = {
        ("pararl-async", 0): _fake(PARARL_STDERR),
        ("pararl-async", 1): _fake(PARARL_STDERR),
        ("pararl-serial", 0): _fake(
            "pararl: step budget reached after 100,000 env steps in 9.0 s (best eval 300.0)\n"
        ),
        ("pararl-serial", 1): _fake("Traceback: it broke\n", code=1),
        ("sb3", 0): _fake(
            stdout='sb3-dqn: {"solved": true, "env_steps": 20000, '
            '"train_s": 1.0, "best_eval": 490.0}\n'
        ),
        ("sb3", 1): _fake(sleep=30.0),
    }
    checks = {
        "pararl-async": _fake(stdout="CartPole-v1: mean return 480.0 ± 1.0 over 20 episodes\n"),
        "pararl-serial": _fake(stdout="CartPole-v1: mean return 300.0 ± 1.0 over 20 episodes\n"),
        "sb3": _fake(stdout='sb3-dqn: {"mean": 500.0, "std": 0.0, "episodes": 20}\n'),
    }
    monkeypatch.setattr(training, "warm_up", lambda workdir: None)
    monkeypatch.setattr(solve, "train_command", lambda sy, seed, out, o, a: trains[(sy, seed)])
    monkeypatch.setattr(solve, "verify_command", lambda sy, out, o, a: checks[sy])
    systems = ("pararl-serial", "pararl-async", "sb3")
    labels = {s: s.upper() for s in systems}
    result = solve.measure(systems, SolveOptions(seeds=(0, 1), run_timeout_s=3.0), "dqn", labels)

    runs = result.runs
    assert [(r.system, r.seed) for r in runs] == [(sy, seed) for seed in (0, 1) for sy in systems]
    by = {(r.system, r.seed): r for r in runs}
    assert by[("pararl-async", 0)].solved
    assert (by[("pararl-async", 0)].env_steps, by[("pararl-async", 0)].verify_mean) == (12288, 480)
    assert not by[("pararl-serial", 0)].solved
    assert by[("pararl-serial", 0)].status == "step budget reached"
    assert by[("pararl-serial", 1)].status == "failed"
    assert "it broke" in by[("pararl-serial", 1)].note
    assert by[("sb3", 0)].solved
    assert by[("sb3", 0)].env_steps == 20000
    assert by[("sb3", 1)].status == "timeout"
    assert 3.0 <= by[("sb3", 1)].wall_s < 20.0

    rows = {row.system: row for row in result.systems}
    assert rows["pararl-serial"].solved == 0
    assert rows["pararl-serial"].time_to_solve_s is None  # not solved
    assert rows["sb3"].time_to_solve_s is None  # median of (t, never) is never
    walls = [r.wall_s for r in runs if r.system == "pararl-async"]
    assert rows["pararl-async"].time_to_solve_s == pytest.approx(statistics.median(walls))
    assert solve.ratios_text(result) == "PARARL-SERIAL not solved, PARARL-ASYNC not solved"
    assert "| PARARL-ASYNC | 2/2 |" in solve.block(result, SolveOptions().__dict__)


def test_sb3_zoo_settings() -> None:
    hp = sb3.ppo_hyper()
    assert {k: hp[k] for k in ("n_steps", "batch_size", "n_epochs", "gamma")} == {
        "n_steps": 32,
        "batch_size": 256,
        "n_epochs": 20,
        "gamma": 0.98,
    }
    assert (sb3.ZOO_PPO_ENVS, hp["gae_lambda"], hp["ent_coef"]) == (8, 0.8, 0.0)
    assert hp["learning_rate"](0.25) == pytest.approx(2.5e-4)
    assert hp["clip_range"](0.5) == pytest.approx(0.1)
    assert sb3.dqn_hyper(100_000)["exploration_fraction"] == pytest.approx(0.08)  # 8,000 steps


def test_sb3_anchor_tiny_budget(tmp_path: Path) -> None:
    """The real SB3 process: trains (no update yet at 300 steps), evaluates, saves, and
    its check reads the model back; both print a parsable result line."""
    model = tmp_path / "model.zip"
    args = ["--seed", "3", "--budget", "300", "--eval-every", "100", "--eval-episodes", "2"]
    cmd = [sys.executable, "-m", "benchmarks.lib.sb3", "dqn", "train", *args, "--save", str(model)]
    train = training.run_process(cmd, 120.0, tmp_path)
    assert train.returncode == 0, train.stderr
    result = sb3.parse(train.stdout, "dqn")
    assert result is not None
    # SB3 collects train_freq (256) steps at a time: it ends on a multiple past the budget
    assert (result["env_steps"], result["evaluations"], result["solved"]) == (512, 5, False)
    assert 0 < result["best_eval"] < 475
    verify = [sys.executable, "-m", "benchmarks.lib.sb3", "dqn", "verify", str(model)]
    verified = training.run_process([*verify, "--episodes", "2"], 120.0, tmp_path)
    checked = sb3.parse(verified.stdout, "dqn")
    assert checked is not None
    assert checked["episodes"] == 2
    assert checked["mean"] >= 8  # a CartPole pole falls in no fewer steps, whatever the policy
