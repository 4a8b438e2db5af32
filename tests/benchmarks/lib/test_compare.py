"""The learning comparison (`lib.compare`): the parsers on real output formats, the
commands of every system, the harness on fake training processes (solved, unsolved,
crashed, hung) and its time-to-solve arithmetic, and the real SB3 anchor on a tiny
budget (learn, then check its saved model)."""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from benchmarks.lib.compare import Outcome
from benchmarks.lib.harness import Metadata
from benchmarks.lib.training import parse_evaluate, parse_final

from benchmarks import dqn, learning
from benchmarks.lib import compare, sb3, training

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


def options(row: compare.Comparison, **changes: Any) -> Any:
    return compare.resolve(row, dataclasses.replace(dqn.Config(), **changes))


def test_commands_of_every_system(tmp_path: Path) -> None:
    c = options(dqn.SOLVE, budget=1_000, eval_every=500)
    averaging = compare.pararl_command(
        dqn.SOLVE, c, dqn.SOLVE.system("pararl-averaging"), "CartPole-v1", 0, tmp_path
    )
    assert "--mode averaging --workers 2" in " ".join(averaging)
    assert averaging[averaging.index("--target-return") + 1] == "475.0"
    mine = learning.PPO.system("pararl")
    cmd = compare.pararl_command(learning.PPO, c, mine, "CartPole-v1", 3, tmp_path)
    assert cmd[2:6] == ["pararl.cli", "train", "ppo", "--env"]
    assert "--mode" not in cmd  # `pararl` = the defaults
    assert cmd[cmd.index("--eval-every") + 1] == "500"
    anchor = compare.anchor_command(learning.PPO, c, learning.PPO.system("sb3"), "CartPole-v1", 3,
                                    tmp_path)  # fmt: skip
    assert anchor[2:5] == ["benchmarks.lib.sb3", "ppo", "learn"]
    assert anchor[anchor.index("--anchor") + 1] == "zoo"
    assert anchor[anchor.index("--target") + 1] == "475.0"
    assert "--set" not in anchor  # the zoo's settings as they are


def test_an_anchors_flags_go_over_its_settings(tmp_path: Path) -> None:
    c = learning.benchmark("sac").resolve(
        learning.SACConfig(hidden=(16,), learning_starts=300, sb3_threads=1)
    )
    row = compare.with_options(learning.SAC, c)
    cmd = compare.anchor_command(row, c, row.system("sb3"), "Hopper-v5", 0, tmp_path)
    settings = cmd[cmd.index("--set") + 1 :]
    assert settings == ["learning_starts=300", "net=[16]"]
    assert cmd[cmd.index("--threads") + 1] == "1"
    assert sb3.overrides(settings) == {"learning_starts": 300, "policy_kwargs": {"net_arch": [16]}}


def _fake(stderr: str = "", stdout: str = "", code: int = 0, sleep: float = 0.0) -> list[str]:
    script = (
        f"import sys, time; time.sleep({sleep}); sys.stdout.write({stdout!r}); "
        f"sys.stderr.write({stderr!r}); sys.exit({code})"
    )
    return [sys.executable, "-c", script]


def test_solve_harness_on_fake_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Solved, unsolved, crashed and hung runs are told apart, and ratios follow."""
    solved = PARARL_STDERR
    budget = "pararl: step budget reached after 100,000 env steps in 9.0 s (best eval 300.0)\n"
    anchor = {"status": "solved", "env_steps": 20000, "train_s": 1.0, "updates": 9,
              "curve": [{"env_steps": 20000, "wall_s": 1.0, "eval_return": 490.0}],
              "train_return": 200.0}  # fmt: skip
    trains = {
        ("pararl-async", 0): _fake(solved),
        ("pararl-async", 1): _fake(solved),
        ("pararl-serial", 0): _fake(budget),
        ("pararl-serial", 1): _fake("Traceback: it broke\n", code=1),
        ("sb3", 0): _fake(stdout=f"sb3-dqn: {json.dumps(anchor)}\n"),
        ("sb3", 1): _fake(sleep=30.0),
    }
    checks = {
        "pararl-async": _fake(stdout="CartPole-v1: mean return 480.0 ± 1.0 over 20 episodes\n"),
        "sb3": _fake(stdout='sb3-dqn: {"mean": 500.0, "std": 0.0, "episodes": 20}\n'),
    }

    def train(row: Any, c: Any, s: compare.System, env: str, seed: int, out: Path) -> list[str]:
        return trains[(s.name, seed)]

    def check(s: compare.System, env: str, out: Path, episodes: int, workdir: Path) -> Any:
        done = training.run_process(checks[s.name], 10.0, workdir)
        result = sb3.parse(done.stdout, "dqn") if s.anchor else None
        return result["mean"] if result else training.parse_evaluate(done.stdout)

    monkeypatch.setattr(training, "warm_up", lambda workdir: None)
    monkeypatch.setattr(compare, "pararl_command", train)
    monkeypatch.setattr(compare, "anchor_command", train)
    monkeypatch.setattr(compare, "check", check)
    c = options(dqn.SOLVE, runs=("CartPole-v1:0", "CartPole-v1:1"), run_timeout_s=3.0,
                systems=("pararl-serial", "pararl-async", "sb3"))  # fmt: skip
    runs = compare.measure(dqn.SOLVE, c, Metadata("x", {})).runs

    assert [(r.system, r.seed) for r in runs] == [(s, seed) for seed in (0, 1) for s in c.systems]
    by = {(r.system, r.seed): r for r in runs}
    assert compare.solved(dqn.SOLVE, by[("pararl-async", 0)])
    assert (by[("pararl-async", 0)].env_steps, by[("pararl-async", 0)].check) == (12288, 480.0)
    assert not compare.solved(dqn.SOLVE, by[("pararl-serial", 0)])
    assert by[("pararl-serial", 0)].status == "step budget reached"
    assert by[("pararl-serial", 1)].status == "failed"
    assert "it broke" in by[("pararl-serial", 1)].note
    assert compare.solved(dqn.SOLVE, by[("sb3", 0)])
    assert by[("sb3", 0)].env_steps == 20000
    assert by[("sb3", 1)].status == "timeout"
    assert 3.0 <= by[("sb3", 1)].wall_s < 20.0

    lines = {x.system: x for x in compare.lines(dqn.SOLVE, runs, 3)}
    assert lines["pararl-serial"].solved == 0
    assert lines["pararl-serial"].solve_s is None  # not solved
    assert lines["sb3"].solve_s is None  # median of (t, never) is never
    walls = [r.wall_s for r in runs if r.system == "pararl-async"]
    assert lines["pararl-async"].solve_s == pytest.approx(statistics.median(walls))
    assert lines["pararl-async"].vs_anchor is None  # SB3's median is never
    c = SimpleNamespace(**dataclasses.asdict(c))
    ratios, blocks, _ = compare.report(dqn.SOLVE, Outcome("dqn", runs), c)
    assert ratios.startswith("CartPole pararl serial: time to solve ÷ SB3 DQN (zoo) not solved")
    # pararl async solved both seeds, SB3 only one: no ratio, and the ratios say why
    assert "pararl async: time to solve ÷ SB3 DQN (zoo) – (SB3 DQN (zoo) not solved)" in ratios
    assert "| CartPole-v1 | pararl async | 2 |" in blocks[0]
    assert "| 2/2 |" in blocks[0]


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
    cmd = [sys.executable, "-m", "benchmarks.lib.sb3", "dqn", "learn", *args, "--target", "475"]
    train = training.run_process([*cmd, "--save", str(model)], 120.0, tmp_path)
    assert train.returncode == 0, train.stderr
    result = sb3.parse(train.stdout, "dqn")
    assert result is not None
    # SB3 collects train_freq (256) steps at a time: it ends on a multiple past the budget
    assert (result["env_steps"], len(result["curve"]), result["status"]) == (
        512,
        5,
        "step budget reached",
    )
    assert 0 < result["best_eval"] < 475
    verify = [sys.executable, "-m", "benchmarks.lib.sb3", "dqn", "verify", str(model)]
    verified = training.run_process([*verify, "--episodes", "2"], 120.0, tmp_path)
    checked = sb3.parse(verified.stdout, "dqn")
    assert checked is not None
    assert checked["episodes"] == 2
    assert checked["mean"] >= 8  # a CartPole pole falls in no fewer steps, whatever the policy


def test_sb3_td3_anchor_learns_with_the_zoo_settings(tmp_path: Path) -> None:
    """The anchor a TD3 row would run: SB3's TD3 with rl-zoo's MuJoCo settings (here on
    Pendulum, its first update at 100 steps and a tiny network)."""
    assert sb3.ZOO_TD3["policy_kwargs"] == {"net_arch": [400, 300]}
    assert sb3.ZOO_TD3["learning_starts"] == 10_000
    cmd = sb3.command(
        "td3", "learn", anchor="rl-zoo", env="Pendulum-v1", budget=300, eval_every=150,
        eval_episodes=1, set=["learning_starts=100", "net=[16]"],
    )  # fmt: skip
    done = training.run_process(cmd, 120.0, tmp_path)
    assert done.returncode == 0, done.stderr
    result = sb3.parse(done.stdout, "td3")
    assert result is not None
    assert (result["env_steps"], result["status"]) == (300, "step budget reached")
    assert result["updates"] == 300 - 100  # one update per env step after the random ones
    assert [p["env_steps"] for p in result["curve"]] == [150, 300]


def test_options_take_the_tables_values_and_anchors_run_where_the_row_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = learning.benchmark("mujoco").resolve(learning.Config(quick=True, budget=2_048))
    # --quick's values for what was left alone, the table's for the rest, the user's first
    assert (c.runs, c.budget, c.eval_every, c.final_evals) == (("HalfCheetah-v5:0",), 2_048,
                                                                4_096, 1)  # fmt: skip
    assert (c.systems, c.run_timeout_s) == (("pararl", "sb3"), learning.MUJOCO.run_timeout_s)
    calls: list[tuple[str, str]] = []

    def run_one(row: Any, c: Any, s: compare.System, env: str, seed: int, workdir: Path) -> Any:
        calls.append((s.name, env))
        return compare.Run(s.name, env, seed, 1.0, True)

    monkeypatch.setattr(compare, "run_one", run_one)
    c = dataclasses.replace(c, runs=("HalfCheetah-v5:0", "Hopper-v5:0"))
    compare.measure(learning.MUJOCO, c, Metadata("x", {}))
    # SB3 runs on HalfCheetah alone (`anchor_envs`): Hopper is held against the papers
    assert calls == [
        ("pararl", "HalfCheetah-v5"),
        ("sb3", "HalfCheetah-v5"),
        ("pararl", "Hopper-v5"),
    ]
    calls.clear()  # the anchor on the row's first seeds alone (`anchor_seeds`)
    row = dataclasses.replace(learning.MUJOCO, anchor_envs=(), anchor_seeds=(0,))
    compare.measure(row, dataclasses.replace(c, runs=("Hopper-v5:0", "Hopper-v5:1")),
                    Metadata("x", {}))  # fmt: skip
    assert calls == [("pararl", "Hopper-v5"), ("sb3", "Hopper-v5"), ("pararl", "Hopper-v5")]


def test_file_names_hold_no_colon_or_slash() -> None:
    """A kept ENV:SEED's file and a run's directory: a `module:Env-v0` id's colon is
    refused in names on Windows, and a `/` would make a folder."""
    assert compare.file_name("popgym:popgym-RepeatPreviousEasy-v0") == (
        "popgym_popgym-RepeatPreviousEasy-v0"
    )
    assert compare.file_name("MinAtar/Breakout-v1") == "MinAtar_Breakout-v1"
    assert compare.directory(Path("w"), "sb3", "a:b/C-v0", 2) == Path("w/sb3-a_b_C-v0-2")


def test_a_return_reads_whole_from_100_and_three_digits_below() -> None:
    assert [compare.whole(v) for v in (None, 0.972, 43.71, 4.0, 99.96, 1234.4)] == [
        "–", "0.972", "43.7", "4.0", "100", "1234"
    ]  # fmt: skip
    assert compare.whole(4.63e-18) == "0.0"  # returns that cancel in float, not 4.63e-18
