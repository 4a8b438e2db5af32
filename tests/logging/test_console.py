"""The progress line: the evaluations a run skipped beside its last evaluation, in
plain lines always and on the bar where the terminal has room."""

from __future__ import annotations

import io

import pytest

from pararl.logging.console import Console, summary

ROW = {"env_steps": 50_000, "eval_return": 212.4, "steps_per_s": 5000.0, "eval_skipped": 9}


def test_plain_lines_say_how_many_evaluations_were_skipped() -> None:
    assert "eval 212.4 (9 skipped)" in summary(ROW)
    assert "skipped" not in summary({**ROW, "eval_skipped": 0})


@pytest.mark.parametrize(("columns", "shown"), [(80, False), (100, True)])
def test_the_bar_shows_them_where_there_is_room(
    columns: int, shown: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    console = Console(100_000, "bar", "ppo CartPole-v1")
    out = io.StringIO()
    console._bar.console.file = out
    console.update(ROW)
    console.close(60_000, 212.4, 9)
    last = out.getvalue().splitlines()[-1]
    assert "━" in last  # the bar and the evaluation, always
    assert "eval 212.4" in last
    assert ("(9 skipped)" in last) is shown
    assert len(last) < columns


def test_a_populations_plain_line_says_its_steps_are_each_agents(
    capsys: pytest.CaptureFixture[str],
) -> None:
    Console(100_000, "plain", "ppo CartPole-v1", agents=4).update(ROW)
    Console(100_000, "plain", "ppo CartPole-v1").update(ROW)
    population, single = capsys.readouterr().err.splitlines()
    assert population.startswith("[ppo CartPole-v1] 50,000/100,000 steps each  steps/s 5,000")
    assert single.startswith("[ppo CartPole-v1] 50,000/100,000 steps  steps/s 5,000")


def test_slow_rates_keep_two_digits() -> None:
    """MAML's meta-updates come seconds apart: 0.13/s, not 0."""
    line = summary({"steps_per_s": 21_333.4, "updates_per_s": 0.1333})
    assert line == "steps/s 21,333  upd/s 0.13"
    assert summary({"updates_per_s": 0.0}) == "upd/s 0"
