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


def _quick(entry: results.Entry, **quick: object) -> results.Entry:
    return dataclasses.replace(entry, quick={**entry.quick, **quick})


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quick_runs_are_carried_on_write_the_page_and_are_not_run_twice(
    bench: Callable[..., dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each kind of run stopped once and carried on to its end where it stopped (SB3's
    anchor from its saved state, pararl's from the checkpoint it saved when stopped), a
    real MAML run beside them (2 iterations, 2 tasks x 2 episodes of 20 steps); the page
    from the saved curves; a finished run not run again."""
    pytest.importorskip("minatar")
    pytest.importorskip("stable_baselines3")
    entries = {e.name: e for e in results.ENTRIES}
    ppo = entries["minatar-ppo-breakout"] = _quick(
        entries["minatar-ppo-breakout"], total_steps=4_096, eval_episodes=1
    )
    anchor = entries["minatar-dqn-breakout-sb3"]
    maml = "maml-navigation2d"
    entries[maml] = _quick(entries[maml], meta_iterations=2)
    monkeypatch.setattr(results, "ENTRIES", tuple(entries.values()))
    monkeypatch.setattr(training, "POLL_S", 0.1)  # each piece stopped soon after its condition
    config = results.resolve(results.Config(quick=True, out_dir=tmp_path))
    assert config.state_dir is not None
    log = config.state_dir / f"{anchor.name}.log"
    learning = lambda: log.exists() and "sb3: learning from" in log.read_text()  # noqa: E731
    deadline = time.monotonic() + 600.0  # a bound only: each piece ends on its condition
    first = results.advance(anchor, config, deadline, learning)
    assert first.status == "paused"
    assert 0 < first.pieces[0].to_x < 3_000
    assert (config.state_dir / anchor.name / "replay.pkl").exists()

    def evaluated() -> bool:
        return bool(results.read_curves(ppo, config.state_dir / ppo.name)[0]["greedy evaluation"])

    stopped = results.advance(ppo, config, deadline, evaluated)
    assert stopped.status == "paused"
    [piece] = stopped.pieces
    assert piece.from_x == 0
    assert 0 < piece.to_x < 4_096  # stopped with rollouts to go
    assert not _running_with(str(tmp_path))

    args = ("results", "--quick", "--update-benchmarks", "True", "--entries")
    data = bench(*args, ppo.name, anchor.name, maml)
    saved = {s["name"]: s for s in data["results"]["saved"]}
    mine, theirs, meta = saved[ppo.name], saved[anchor.name], saved[maml]
    assert mine["status"] == "step budget reached"
    assert [p[0] for p in mine["curves"]["greedy evaluation"]][-1] == 4_096
    assert mine["command"].startswith("pararl train ppo --env MinAtar/Breakout-v1 --seed 0")
    pieces = [(p["from_x"], p["to_x"], p["status"]) for p in mine["pieces"]]
    # resumed from the checkpoint saved when it was stopped
    assert pieces == [(0, piece.to_x, "paused"), (piece.to_x, 4_096, "step budget reached")]
    assert "resuming from checkpoints/" in (config.state_dir / f"{ppo.name}.log").read_text()
    assert not list(config.state_dir.glob("*.stale-*"))
    assert theirs["status"] == "step budget reached"
    assert theirs["command"].startswith("python -m benchmarks.lib.sb3 dqn learn --anchor minatar")
    assert "--state" not in theirs["command"]
    # the evaluation schedule went on where the first piece left it, on one clock
    curve = theirs["curves"]["evaluation (deterministic)"]
    assert [p[0] for p in curve] == [500, 1000, 1500, 2000, 2500, 3000]
    assert [p[1] for p in curve] == sorted(p[1] for p in curve)
    pieces = [(p["from_x"], p["to_x"], p["status"]) for p in theirs["pieces"]]
    assert pieces == [(0, first.pieces[0].to_x, "paused"),
                      (first.pieces[0].to_x, 3_000, "step budget reached")]  # fmt: skip
    assert theirs["wall_s"] == pytest.approx(sum(p["wall_s"] for p in theirs["pieces"]))
    assert not (config.state_dir / anchor.name / "replay.pkl").exists()
    assert meta["status"] == "step budget reached"
    after, before = meta["curves"]["after one adaptation step"], meta["curves"]["before adaptation"]
    assert [p[0] for p in after] == [p[0] for p in before] == [1, 2]
    assert all(p[2] < 0 for p in after + before)  # distances to the goals
    assert "maml-navigation2d: after − before:" in data["key_ratios"]
    page = (tmp_path / "BENCHMARKS.md").read_text()
    assert f"| {ppo.name}: pararl PPO | MinAtar/Breakout-v1 | 4,096 / 5,000,000 steps |" in page
    for group in (ppo.name, "minatar-dqn-breakout", maml):
        assert (tmp_path / f"results_{group}.png").read_bytes().startswith(PNG)
        assert f"results_{group}.png)" in page
    assert not _running_with(str(tmp_path))

    again = bench(*args, ppo.name)  # finished: kept, not run again
    assert next(s for s in again["results"]["saved"] if s["name"] == ppo.name) == mine


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
