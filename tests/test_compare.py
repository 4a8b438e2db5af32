"""`pararl compare`: run directories written as a run writes them (config.json, and
eval.csv through the session's own writer and columns), read into each agent's final
return, compared, printed; bad input is one line and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pararl import DQNConfig, stats
from pararl.config import to_json
from pararl.logging import MetricsWriter
from pararl.scores import AGENT, RETURN, STEPS, final_returns, side

BATCHED = [412.0, 388.5, 500.0, 455.0, 97.0, 430.0, 468.5, 401.0]
SEPARATE = [350.0, 322.5, 389.0, 399.5, 301.0, 277.0, 364.0, 340.5]  # none ties BATCHED


def eval_columns() -> tuple[str, ...]:
    """eval.csv's columns, as a run declares them (`runners.session`)."""
    from pararl.runners.session import EVAL_METRICS

    return EVAL_METRICS


def make_run(
    root: Path,
    finals: Sequence[float],
    agents: bool = True,
    env: str = "CartPole-v1",
    steps: int = 2_000,
    settings: Sequence[dict[str, Any]] = (),
) -> Path:
    """A run directory holding config.json and an eval.csv of two evaluations per agent,
    the last at `steps` with the returns `finals` (one agent per return). `agents`: with
    the `agent` column (a run of several agents), else without (one agent, one return);
    `settings`: each agent's seed and swept settings, as a sweep lists them."""
    assert agents or len(finals) == 1
    root.mkdir(parents=True)
    config = DQNConfig(env=env, run_dir=root)
    resolved: dict[str, Any] = {"env_kind": "discrete"}
    if settings:
        resolved["agents"] = list(settings)
    (root / "config.json").write_text(to_json(config, {"resolved": resolved}))
    columns = (AGENT, *eval_columns()) if agents else eval_columns()  # as a population writes it
    writer = MetricsWriter(root / "eval.csv", None, columns)
    for at, scale in ((steps // 2, 0.5), (steps, 1.0)):
        for i, final in enumerate(finals):
            row: dict[str, Any] = {
                STEPS: at,
                "wall_s": 1.5,
                RETURN: scale * final,
                "eval_std": 3.0,
                "eval_episodes": 10,
            }
            if agents:
                row[AGENT] = i
            writer.write(row)
    writer.close()
    return root


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """One run of 8 agents, and a directory of 8 runs of one."""
    batched = make_run(tmp_path / "batched", BATCHED)
    seeds = tmp_path / "seeds"
    for i, final in enumerate(SEPARATE):
        make_run(seeds / f"seed{i}", [final], agents=False)
    return batched, seeds


def test_the_columns_read_are_those_a_run_writes() -> None:
    assert RETURN in eval_columns()
    assert STEPS in eval_columns()


def test_the_printed_numbers_are_the_statistics_of_the_final_returns(
    runs: tuple[Path, Path], tmp_path: Path, pararl: Any
) -> None:
    batched, seeds = runs
    out = tmp_path / "out" / "numbers.json"
    args = ("compare", str(batched), str(seeds), "--seed", "7", "--reps", "3000")
    result = pararl(*args, "--json", str(out))
    assert result.returncode == 0, result.stderr
    text = result.stdout

    a, b = np.array(BATCHED), np.array(SEPARATE)
    sides, both = np.random.SeedSequence(7).spawn(2)
    saved = json.loads(out.read_text())
    for name, scores in (("a", a), ("b", b)):
        ci = stats.bootstrap_ci(scores, stats.iqm, 3000, 0.95, np.random.default_rng(sides))
        one = saved[name]
        assert one["agents"] == 8
        assert one["iqm"] == stats.iqm(scores)
        assert one["iqm_ci"] == list(ci)
        assert one["median"] == float(np.median(scores))
        assert one["mean"] == float(np.mean(scores))
        assert [s["score"] for s in one["scores"]] == list(scores)  # the last rows
        shown = f"IQM {stats.iqm(scores):.1f}  95% CI [{ci[0]:.1f}, {ci[1]:.1f}]"
        assert shown in text, text
        assert f"median {np.median(scores):.1f}   mean {np.mean(scores):.1f}" in text
    poi = stats.probability_of_improvement(a, b)
    poi_ci = stats.probability_of_improvement_ci(a, b, 3000, 0.95, np.random.default_rng(both))
    p = stats.mann_whitney(a, b)
    assert saved["probability_of_improvement"] == poi
    assert saved["probability_of_improvement_ci"] == list(poi_ci)
    assert saved["mann_whitney_p"] == p
    assert saved["mann_whitney_method"] == "exact"  # 8 against 8, no ties
    assert f"P(A > B) {poi:.3f}  95% CI [{poi_ci[0]:.3f}, {poi_ci[1]:.3f}]" in text
    assert f"Mann-Whitney U, two-sided (exact): p = {p:.3g}" in text
    assert p < 0.05
    assert (
        f"A's returns are higher than B's: a significant difference at 0.05 (p = {p:.3g})" in text
    )
    assert "batched: 1 run, 8 agents (CartPole-v1), final evaluations at 2,000 env steps" in text
    assert "seeds: 8 runs, 8 agents (CartPole-v1)" in text
    assert saved["a"]["runs"] == [str(batched)]
    assert saved["b"]["runs"] == [str(seeds / f"seed{i}") for i in range(8)]
    assert f"numbers written to {out}" in text
    # the same seed, the same output
    assert pararl(*args).stdout == text.replace(f"numbers written to {out}\n", "")


def test_one_run_of_n_agents_is_n_runs_of_one(tmp_path: Path, pararl: Any) -> None:
    """The same returns as one run of 8 agents or as 8 runs: the same side, to the last
    digit of its interval (a side's interval draws the same whether it is A or B)."""
    batched = make_run(tmp_path / "batched", BATCHED)
    for i, final in enumerate(BATCHED):
        make_run(tmp_path / "seeds" / f"s{i}", [final], agents=False)
    result = pararl("compare", str(batched), str(tmp_path / "seeds"), "--reps", "2000")
    assert result.returncode == 0, result.stderr
    a_line, b_line = (line for line in result.stdout.splitlines() if "IQM" in line)
    assert a_line == b_line
    assert "P(A > B) 0.500" in result.stdout
    assert "no significant difference at 0.05 (p = 1)" in result.stdout


def test_sides_from_several_paths(runs: tuple[Path, Path], tmp_path: Path, pararl: Any) -> None:
    batched, seeds = runs
    three = [str(seeds / f"seed{i}") for i in range(3)]
    result = pararl("compare", "--a", *three, "--b", str(batched))
    assert result.returncode == 0, result.stderr
    assert "A  " + ", ".join(three) + ": 3 runs, 3 agents" in result.stdout
    assert "B  " + str(batched) + ": 1 run, 8 agents" in result.stdout
    # the positional run is the side --a and --b leave
    result = pararl("compare", str(batched), "--b", *three)
    assert result.returncode == 0, result.stderr
    assert "A  " + str(batched) + ": 1 run, 8 agents" in result.stdout
    assert "B  " + ", ".join(three) + ": 3 runs, 3 agents" in result.stdout
    # a run and a directory of runs pooled into one side
    more = make_run(tmp_path / "more", [10.0, 20.0])
    result = pararl("compare", "--a", str(seeds), str(more), "--b", str(batched))
    assert result.returncode == 0, result.stderr
    assert "9 runs, 10 agents" in result.stdout


def test_too_few_agents_to_tell_says_so(tmp_path: Path, pararl: Any) -> None:
    a = make_run(tmp_path / "a", [10.0, 11.0, 12.0])
    b = make_run(tmp_path / "b", [20.0, 21.0, 22.0])
    result = pararl("compare", str(a), str(b), "--reps", "500")
    assert result.returncode == 0, result.stderr
    assert (
        "no significant difference at 0.05 (p = 0.1); 3 agents against 3 can give no p "
        "below 0.1: more agents are needed to tell"
    ) in result.stdout


def test_too_few_agents_say_so_with_ties_too(tmp_path: Path, pararl: Any) -> None:
    """Tied scores (CartPole's 500s) make the test asymptotic; with 4 agents against 2
    no untied split reaches 0.05 either way, and the verdict says so."""
    a = make_run(tmp_path / "a", [500.0, 500.0, 500.0, 480.0])
    b = make_run(tmp_path / "b", [200.0, 200.0])
    result = pararl("compare", str(a), str(b), "--reps", "500")
    assert result.returncode == 0, result.stderr
    assert "(asymptotic)" in result.stdout
    assert "4 agents against 2 can give no p below 0.133: more agents are needed" in (result.stdout)
    # a degenerate tie the normal approximation calls significant: flagged
    one = make_run(tmp_path / "one", [100.0])
    many = make_run(tmp_path / "many", [500.0] * 12)
    result = pararl("compare", str(many), str(one), "--reps", "500")
    assert "a significant difference at 0.05" in result.stdout
    assert "but untied, 12 agents against 1 can give no p below 0.154: more agents are" in (
        result.stdout
    )


def test_b_higher_and_runs_on_different_envs(tmp_path: Path, pararl: Any) -> None:
    a = make_run(tmp_path / "a", [float(v) for v in range(10)], env="CartPole-v1")
    b = make_run(tmp_path / "b", [float(v) for v in range(50, 60)], env="Acrobot-v1")
    result = pararl("compare", str(a), str(b), "--reps", "500", "--alpha", "0.01")
    assert result.returncode == 0, result.stderr
    p = stats.mann_whitney(range(10), range(50, 60))
    assert f"B's returns are higher than A's: a significant difference at 0.01 (p = {p:.3g})" in (
        result.stdout
    )
    assert "(asymptotic)" in result.stdout  # 10 against 10
    warning = "warning: these runs are on 2 envs (Acrobot-v1, CartPole-v1)"
    assert result.stdout.startswith(warning)  # said before the numbers
    assert "final evaluations are at" not in result.stdout  # the same budget


def test_final_evaluations_far_apart_are_said(tmp_path: Path, pararl: Any) -> None:
    a = make_run(tmp_path / "a", [1.0, 2.0, 3.0], steps=3_072)
    b = make_run(tmp_path / "b", [1.0, 2.0], steps=20_224)
    result = pararl("compare", str(a), str(b), "--reps", "200")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "warning: the final evaluations are at 3,072 env steps (A) and 20,224 (B)"
    )


def test_final_returns_are_each_agent_s_last_row(tmp_path: Path) -> None:
    """By agent number, whatever the rows' order; rows without a return are passed over;
    a run without the agent column (or a blank cell) is agent 0."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "eval.csv").write_text(
        "env_steps,wall_s,eval_return,agent\n"
        "100,1,5.0,1\n"
        "100,1,7.0,0\n"
        "200,2,6.5,1\n"
        "200,2,,0\n"  # an evaluation row with no return
        "300,3,9.0,0\n"
    )
    got = [(f.agent, f.env_steps, f.score) for f in final_returns(run)]
    assert got == [(0, 300, 9.0), (1, 200, 6.5)]
    (run / "eval.csv").write_text("env_steps,eval_return\n100,1.5\n200,2.5\n")
    assert [(f.agent, f.score) for f in final_returns(run)] == [(0, 2.5)]


def test_a_run_named_twice_on_a_side_is_refused(runs: tuple[Path, Path]) -> None:
    from pararl.errors import UsageError

    batched, seeds = runs
    with pytest.raises(UsageError, match="named twice on side A"):
        side([seeds, seeds / "seed3"], "A")
    assert len(side([seeds, batched], "A").finals) == 16


def test_a_sweeps_combinations_compare_with_each_other(tmp_path: Path, pararl: Any) -> None:
    """RUN:NAME=VALUE keeps the agents with that setting (numbers compared as numbers:
    3e-4 is 0.0003); a setting not swept, or a value no agent has, is refused."""
    lrs = (3e-4, 1e-3)
    agents = [{"seed": i, "lr": lr} for lr in lrs for i in range(3)]
    run = make_run(tmp_path / "sweep", [1.0, 2.0, 3.0, 10.0, 11.0, 12.0], settings=agents)
    assert side([Path(f"{run}:lr=3e-4")]).scores.tolist() == [1.0, 2.0, 3.0]
    assert side([Path(f"{run}:lr=0.001")]).scores.tolist() == [10.0, 11.0, 12.0]
    assert side([Path(f"{run}:seed=1,lr=1e-3")]).scores.tolist() == [11.0]
    result = pararl("compare", f"{run}:lr=1e-3", f"{run}:lr=3e-4")
    assert result.returncode == 0, result.stderr
    assert "lr=1e-3" in result.stdout
    cases = [
        (f"{run}:gamma=0.9", "no setting 'gamma' (theirs: lr, seed)"),
        (f"{run}:lr=5e-4", "no agent of"),
        (f"{run}:lr=", "select agents as RUN:NAME=VALUE"),
        (f"{run}:seed=0,seed=1", "seed named twice"),
    ]
    for given, expect in cases:
        line = _one_error(pararl("compare", given, str(run)))
        assert expect in line, (given, line)
    line = _one_error(pararl("compare", f"{run}:lr=5e-4", str(run)))
    assert "lr: 0.0003, 0.001" in line
    # a run of one agent lists no agents: its seed selects it all the same
    alone = make_run(tmp_path / "alone", [5.0], agents=False)
    assert side([Path(f"{alone}:seed=0")]).scores.tolist() == [5.0]
    assert "no agent of" in _one_error(pararl("compare", f"{alone}:seed=1", str(run)))


def _one_error(result: Any) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pararl: error: ")
    return str(lines[0])


def test_bad_input_is_one_line_and_exit_2(
    runs: tuple[Path, Path], tmp_path: Path, pararl: Any
) -> None:
    batched, seeds = runs
    run = str(batched)
    bare = tmp_path / "bare"  # a run with no evaluation yet: its eval.csv a header only
    bare.mkdir()
    (bare / "config.json").write_text((batched / "config.json").read_text())
    (bare / "eval.csv").write_text(",".join(eval_columns()) + "\n")
    nothing = tmp_path / "nothing"  # not a run, nor a directory of runs
    (nothing / "notes").mkdir(parents=True)
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    broken = make_run(tmp_path / "broken", [1.0, 2.0])
    (broken / "eval.csv").write_text("env_steps,eval_return,agent\n100,1.0,first\n")
    cases = [
        (["compare", run, str(tmp_path / "missing")], "missing does not exist"),
        (["compare", run, str(a_file)], "a_file is not a directory"),
        (["compare", run, str(nothing)], "not a pararl run directory (no config.json)"),
        (["compare", str(bare), run], "bare has no evaluations yet (no rows in eval.csv)"),
        (["compare", run], "compare takes two sides"),
        (["compare", run, run, run], "compare takes two sides"),
        (["compare", run, run, "--a", run], "compare takes two sides"),
        (["compare", "--a", run, str(seeds), run, "--b", run], "named twice on side A"),
        (["compare", run, run], "is on both sides: it would be compared with itself"),
        (["compare", run + ":lr=1e-3", str(seeds)], "(theirs: none: it trained 8 agents without"),
        (["compare", run, str(seeds), "--reps", "0"], "--reps must be >= 1"),
        (["compare", run, str(seeds), "--confidence", "1.5"], "--confidence must be between"),
        (["compare", run, str(seeds), "--alpha", "nan"], "--alpha must be between"),
        (["compare", run, str(broken)], "agent 'first' is not an agent number"),
        (["compare", run, str(seeds), "--json", str(a_file / "x.json")], "--json"),
        (["compare", run, str(seeds), "--seeds", "3"], "did you mean --seed?"),
    ]
    for args, expect in cases:
        line = _one_error(pararl(*args))
        assert expect in line, (args, line)
    line = _one_error(pararl("compare", str(bare), run))
    assert f"pararl train --resume {bare}" in line


def test_compare_imports_neither_torch_nor_scipy(runs: tuple[Path, Path]) -> None:
    """The command reads CSV files and does arithmetic: it starts in well under a second
    (no torch), and needs none of scipy (not a dependency of pararl)."""
    batched, seeds = runs
    code = (
        "import sys; from pararl.cli import main; "
        f"rc = main(['compare', {str(batched)!r}, {str(seeds)!r}, '--reps', '100']); "
        "print('torch' in sys.modules, 'scipy' in sys.modules, rc)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.splitlines()[-1] == "False False 0", result.stdout + result.stderr
