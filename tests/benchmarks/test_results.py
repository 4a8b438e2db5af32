"""`python -m benchmarks results`: runs carried on across invocations (a stopped run is
resumed where it stopped, a finished one is not run again, no process outlives an
invocation), and the page written from the saved curves."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main

from benchmarks import results
from benchmarks.lib import training
from tests.benchmarks.conftest import PNG


def _running_with(text: str) -> list[int]:
    """Processes whose command line names `text`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(int(pid))
    return found


@pytest.mark.slow
def test_quick_runs_write_the_page_and_are_not_run_twice(
    bench: Callable[..., dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("minatar")
    pytest.importorskip("stable_baselines3")
    # the SB3 anchor in two pieces: stopped as soon as it learns, then carried to its end
    anchor_entry = next(e for e in results.ENTRIES if e.name == "minatar-dqn-breakout-sb3")
    config = results.resolve(results.Config(quick=True, out_dir=tmp_path))
    assert config.state_dir is not None
    log = config.state_dir / f"{anchor_entry.name}.log"
    monkeypatch.setattr(training, "POLL_S", 0.1)
    learning = lambda: log.exists() and "sb3: learning from" in log.read_text()  # noqa: E731
    deadline = time.monotonic() + 600.0
    first = results.advance(anchor_entry, config, deadline, learning)
    assert first.status == "paused"
    assert 0 < first.pieces[0].to_x < 3000
    assert not _running_with(str(tmp_path))
    assert (config.state_dir / anchor_entry.name / "replay.pkl").exists()

    args = ("results", "--quick", "--update-benchmarks", "True", "--entries")
    data = bench(*args, "minatar-ppo-breakout", "minatar-dqn-breakout-sb3")
    saved = {s["name"]: s for s in data["results"]["saved"]}
    ppo, anchor = saved["minatar-ppo-breakout"], saved["minatar-dqn-breakout-sb3"]
    assert ppo["status"] == "step budget reached"
    assert [p[0] for p in ppo["curves"]["greedy evaluation"]] == [1024, 2048, 3072, 4096]
    assert ppo["command"].startswith("pararl train ppo --env MinAtar/Breakout-v1 --seed 0")
    [piece] = ppo["pieces"]
    assert (piece["from_x"], piece["to_x"], piece["status"]) == (0, 4096, "step budget reached")
    assert anchor["status"] == "step budget reached"
    assert anchor["command"].startswith("python -m benchmarks.lib.sb3 dqn learn --anchor minatar")
    assert "--state" not in anchor["command"]
    # the evaluation schedule went on where the first piece left it, on one clock
    curve = anchor["curves"]["evaluation (deterministic)"]
    assert [p[0] for p in curve] == [500, 1000, 1500, 2000, 2500, 3000]
    assert [p[1] for p in curve] == sorted(p[1] for p in curve)
    pieces = [(p["from_x"], p["to_x"], p["status"]) for p in anchor["pieces"]]
    assert pieces == [(0, first.pieces[0].to_x, "paused"),
                      (first.pieces[0].to_x, 3000, "step budget reached")]  # fmt: skip
    assert anchor["wall_s"] == pytest.approx(sum(p["wall_s"] for p in anchor["pieces"]))
    assert not (config.state_dir / anchor_entry.name / "replay.pkl").exists()
    page = (tmp_path / "BENCHMARKS.md").read_text()
    assert (
        "| minatar-ppo-breakout: pararl PPO | MinAtar/Breakout-v1 | 4,096 / 5,000,000 steps |"
        in page
    )
    for group in ("minatar-ppo-breakout", "minatar-dqn-breakout"):
        assert (tmp_path / f"results_{group}.png").read_bytes().startswith(PNG)
        assert f"results_{group}.png)" in page
    assert not _running_with(str(tmp_path))

    again = bench(*args, "minatar-ppo-breakout")  # finished: kept, not run again
    ppo_again = next(s for s in again["results"]["saved"] if s["name"] == "minatar-ppo-breakout")
    assert ppo_again["pieces"] == ppo["pieces"]


@pytest.mark.slow
def test_a_stopped_run_is_resumed_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("minatar")
    monkeypatch.setattr(training, "POLL_S", 0.1)  # each piece stopped soon after its condition
    entry = dataclasses.replace(
        results.ENTRIES[0],
        quick={"total_steps": 10**7, "eval_every": 2_048, "eval_episodes": 1,
               "checkpoint_every": 4_096, "eval_in": "inline"},
    )  # fmt: skip
    config = results.resolve(results.Config(quick=True, out_dir=tmp_path))
    assert config.state_dir is not None
    assert config.saved_dir is not None
    run_dir = config.state_dir / entry.name

    def evaluated_beyond(steps: float) -> Callable[[], bool]:
        def check() -> bool:
            evals = results.read_curves(entry, run_dir)[0]["greedy evaluation"]
            return bool(evals) and evals[-1][0] > steps

        return check

    deadline = time.monotonic() + 600.0  # a bound only: each piece ends on its condition
    first_saved = results.advance(entry, config, deadline, evaluated_beyond(0))
    assert first_saved.status == "paused"
    assert not _running_with(str(run_dir))
    [first] = first_saved.pieces
    assert first.from_x == 0
    assert first.to_x > 0
    second_saved = results.advance(entry, config, deadline, evaluated_beyond(first.to_x))
    assert not _running_with(str(run_dir))
    assert [p.status for p in second_saved.pieces] == ["paused", "paused"]
    second = second_saved.pieces[1]
    assert second.from_x == first.to_x  # the checkpoint saved when it was stopped
    assert second.to_x > first.to_x
    log = (config.state_dir / f"{entry.name}.log").read_text()
    assert "resuming from checkpoints/" in log
    assert not list(config.state_dir.glob("*.stale-*"))


def test_a_maml_run_keeps_its_return_before_and_after_adaptation(
    bench: Callable[..., dict[str, Any]],
) -> None:
    """A real four-iteration `pararl train maml` run (2 tasks x 2 episodes of 20 steps)."""
    data = bench("results", "--quick", "--entries", "maml-navigation2d")
    [saved] = data["results"]["saved"]
    assert saved["status"] == "step budget reached"
    curves = saved["curves"]
    after, before = curves["after one adaptation step"], curves["before adaptation"]
    assert [p[0] for p in after] == [p[0] for p in before] == [1, 2, 3, 4]
    assert all(p[2] < 0 for p in after + before)  # distances to the goals
    assert "maml-navigation2d: after − before:" in data["key_ratios"]


def test_an_interrupted_invocation_exits_130() -> None:
    assert results.exit_code(results.Results([], "interrupted during pong-ppo")) == 130
    assert results.exit_code(results.Results([], "--hours 1 ran out during pong-ppo")) == 0


def test_unknown_entry_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", "--entries", "pong-dqn"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("benchmarks: error: --entries: unknown pong-dqn; pick from ")
    assert "\n" not in err


def test_a_piece_on_another_machine_is_named_with_its_share_of_the_clock() -> None:
    gpu = "16 cores + NVIDIA H100 80GB HBM3"
    pieces = [
        results.Piece("abc1234", False, "2026-11-26T14:24", 0, 800_000, "paused"),  # older record
        results.Piece("def5678", False, "2026-11-26T17:40", 800_000, 1_700_000, "paused", gpu, 540),
        results.Piece("def5678", False, "2026-11-26T17:55", 1_700_000, 1_800_000, "paused",
                      results.HOME, 900),
    ]  # fmt: skip
    saved = results.Saved("pong-ppo", "pararl train ppo", "paused", "env steps", {}, 6_540, pieces)
    assert results.wall_cell(saved) == f"1.82 h: 9 min on {gpu}, 1.67 h on 2 cores"
    block = results.pieces_block([saved])
    assert f"800,000→1,700,000 on def5678 (2026-11-26T17:40, paused, 9 min; {gpu})" in block
    assert "1,700,000→1,800,000 on def5678 (2026-11-26T17:55, paused, 15 min)" in block
    assert "0→800,000 on abc1234 (2026-11-26T14:24, paused)" in block
    alone = dataclasses.replace(saved, pieces=[pieces[0], pieces[2]])
    assert results.wall_cell(alone) == "1.82 h"  # all here: the clock alone
