"""`pararl bench dqn`, the cheap parts: the time-to-solve harness on fake training
processes and the parsing of real output, the SB3 runner on a tiny budget, and
the throughput and overlap parts end to end through the CLI at tiny durations."""

from __future__ import annotations

import json
import multiprocessing as mp
import statistics
import sys
from pathlib import Path

import pytest

from pararl.bench import dqn_solve
from pararl.bench.common import section_markers
from pararl.bench.dqn_solve import (
    SolveSettings,
    parse_evaluate,
    parse_pararl_final,
    parse_sb3,
    run_process,
    solve_summary,
)
from pararl.bench.seed_dqn import SeedDesign
from pararl.cli import main

PARARL_STDERR = """pararl: DQN on CartPole-v1, mode async, learner on cpu, run dir /tmp/x
eval @ 5,120 steps (3.2 s): 180.0 ± 20.0
pararl: solved after 12,288 env steps in 21.5 s (best eval 500.0); run saved in /tmp/x
"""


def test_parsers_read_real_output_formats() -> None:
    assert parse_pararl_final(PARARL_STDERR) == {
        "status": "solved",
        "env_steps": 12288,
        "train_s": 21.5,
        "best_eval": 500.0,
    }
    unsolved = parse_pararl_final(
        "pararl: step budget reached after 1,000 env steps in 2.0 s (best eval -inf); run saved"
    )
    assert unsolved is not None
    assert (unsolved["status"], unsolved["env_steps"], unsolved["best_eval"]) == (
        "step budget reached",
        1000,
        None,
    )
    assert parse_pararl_final("Traceback (most recent call last):\n  boom") is None
    out = "CartPole-v1: mean return 487.3 ± 12.1 over 20 episodes (best checkpoint of /tmp/x)\n"
    assert parse_evaluate(out) == pytest.approx(487.3)
    assert parse_evaluate("nothing here") is None
    assert parse_sb3('noise\nsb3-dqn: {"mean": 9.5}\n') == {"mean": 9.5}
    assert parse_sb3("sb3-dqn without the colon") is None


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
    monkeypatch.setattr(dqn_solve, "warm_up", lambda workdir: None)
    monkeypatch.setattr(dqn_solve, "train_command", lambda sy, seed, out, s: trains[(sy, seed)])
    monkeypatch.setattr(dqn_solve, "verify_command", lambda sy, out, s: checks[sy])
    systems = ("pararl-serial", "pararl-async", "sb3")
    runs = dqn_solve.measure_solve(systems, (0, 1), SolveSettings(timeout_s=3.0))

    assert [(r.system, r.seed) for r in runs] == [(sy, seed) for seed in (0, 1) for sy in systems]
    by = {(r.system, r.seed): r for r in runs}
    assert by[("pararl-async", 0)].solved
    assert by[("pararl-async", 0)].env_steps == 12288
    assert by[("pararl-async", 0)].verify_mean == 480.0
    assert not by[("pararl-serial", 0)].solved
    assert by[("pararl-serial", 0)].status == "step budget reached"
    assert by[("pararl-serial", 1)].status == "failed"
    assert "it broke" in by[("pararl-serial", 1)].note
    assert by[("sb3", 0)].solved
    assert by[("sb3", 0)].env_steps == 20000
    assert by[("sb3", 1)].status == "timeout"
    assert 3.0 <= by[("sb3", 1)].wall_s < 20.0

    summary = solve_summary(runs, systems)
    per = summary["systems"]
    assert per["pararl-serial"]["solved"] == 0
    assert per["pararl-serial"]["time_to_solve_median_s"] is None  # not solved
    # sb3: one solved, one never: the median of (t, inf) is inf -> not solved
    assert per["sb3"]["time_to_solve_median_s"] is None
    walls = [r.wall_s for r in runs if r.system == "pararl-async"]
    assert per["pararl-async"]["time_to_solve_median_s"] == pytest.approx(statistics.median(walls))
    assert summary["ratio_to_sb3"] == {"pararl-serial": None, "pararl-async": None}


def test_sb3_runner_tiny_budget(tmp_path: Path) -> None:
    """The real SB3 process: trains (no update yet at 300 steps), evaluates, saves,
    and its check reads the model back; both print a parsable result line."""
    model = tmp_path / "model.zip"
    train = run_process(
        [
            *(sys.executable, "-m", "pararl.bench.sb3_dqn", "train", "--seed", "3"),
            *("--budget", "300", "--eval-every", "100", "--eval-episodes", "2"),
            *("--save", str(model)),
        ],
        120.0,
        tmp_path,
    )
    assert train.returncode == 0, train.stderr
    result = parse_sb3(train.stdout)
    assert result is not None
    # SB3 collects train_freq (256) steps at a time: it ends on a multiple past the budget
    assert result["env_steps"] == 512
    assert result["evaluations"] == 5
    assert result["solved"] is False
    assert 0 < result["best_eval"] < 475
    assert model.is_file()
    check = run_process(
        [sys.executable, "-m", "pararl.bench.sb3_dqn", "verify", str(model), "--episodes", "2"],
        120.0,
        tmp_path,
    )
    checked = parse_sb3(check.stdout)
    assert checked is not None
    assert checked["episodes"] == 2
    assert checked["mean"] > 0


def test_seed_design_two_actors_does_not_deadlock() -> None:
    design = SeedDesign(2)
    procs = list(design.procs)
    try:
        assert design.run_for(0.5) > 10
        assert design.learner.learn_step > 0  # the memory starts full: it learns at once
    finally:
        design.close()
    assert len(procs) == 2
    assert not any(p.is_alive() for p in procs)


def test_throughput_and_overlap_end_to_end(tmp_path: Path) -> None:
    md = tmp_path / "BENCHMARKS.md"
    before = {p.pid for p in mp.active_children()}
    code = main(
        [
            *("bench", "dqn", "--parts", "throughput", "overlap", "--actors", "2"),
            *("--workloads", "seed", "--repeats", "1", "--block-s", "0.5", "--warmup-s", "0.2"),
            *("--learner-threads", "1", "--out-dir", str(tmp_path)),
            *("--figure", str(tmp_path / "f.png"), "--benchmarks-md", str(md)),
            *("--update-benchmarks", "True"),
        ]
    )
    assert code == 0
    assert {p.pid for p in mp.active_children()} <= before  # every process reaped
    data = json.loads((tmp_path / "dqn.json").read_text())
    assert data["metadata"]["torch_threads"] == 1
    assert "solve" not in data
    (row,) = data["throughput"]
    assert row["actors"] == 2
    seed = row["systems"]["seed_design"]["transitions_per_s"]
    assert seed["median"] > 0
    assert len(seed["samples"]) == 1
    pararl = row["systems"]["pararl_seed"]
    assert pararl["status"] == "ok"
    assert pararl["transitions_per_s"]["median"] + pararl["updates_per_s"]["median"] > 0
    assert row["ratio_to_seed"]["pararl_seed"] is not None

    modes = data["overlap"]["modes"]
    assert modes["actors"]["steps_per_s"]["median"] > 0
    assert modes["actors"]["updates_per_s"] is None
    assert modes["learner"]["updates_per_s"]["median"] > 0
    assert modes["learner"]["steps_per_s"] is None
    assert set(data["overlap"]["efficiency"]) >= {"actors_ratio", "learner_ratio", "actors_free"}
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    start, end = section_markers("dqn")
    text = md.read_text()
    assert start in text
    assert end in text
    assert "pararl bench dqn" in text


def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "dqn", "--repeats", "0"]) == 2
    assert "--repeats" in capsys.readouterr().err
    assert main(["bench", "dqn", "--parts", "throughput", "--actors", "0"]) == 2
