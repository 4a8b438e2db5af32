"""What a new user meets in the first hour: resume by checkpoint content, options on
resume applied or refused, missing extras named, a progress line that fits,
evaluation that is quick and records real frame timing, and CLI edges. (SIGTERM that
saves: `tests/runners/test_dqn.py`.)"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from pararl import checkpoint
from pararl.cli import main
from pararl.logging.console import Console
from pararl.mp.topology import physical_cores

TINY = [
    "--total-steps", "1000", "--eval-every", "500", "--eval-episodes", "2",
    "--mode", "serial", "--no-tensorboard", "--progress", "plain", "--learning-starts", "100",
    "--eval-in", "inline",  # no evaluation child to start: these tests do not check it
]  # fmt: skip


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished TINY DQN run with a checkpoint every 400 steps, trained once for the
    module; each test works on a copy of it (`run_copy`)."""
    run = tmp_path_factory.mktemp("first_hour") / "run"
    assert main(["train", "dqn", *TINY, "--checkpoint-every", "400", "--run-dir", str(run)]) == 0
    return run


def run_copy(tiny_run: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    return run


def steps_of(path: Path) -> int:
    return int(checkpoint.load(path)["env_steps"])


def metric_steps(run: Path) -> list[tuple[int, int]]:
    """(env steps, updates) of each metrics row."""
    with (run / "metrics.csv").open() as f:
        return [(int(float(r["env_steps"])), int(float(r["updates"]))) for r in csv.DictReader(f)]


def test_resume_picks_the_checkpoint_by_content_not_mtime(
    tiny_run: Path, tmp_path: Path, pararl: Any
) -> None:
    run = run_copy(tiny_run, tmp_path)
    ckpts = run / "checkpoints"
    early = min(ckpts.glob("step_*.pt"), key=steps_of)
    assert steps_of(early) < 400  # a fresh run saves at its first tick: always resumable
    later = time.time() + 60
    os.utime(early, (later, later))  # what a copy without -p does: the old file looks newest
    result = pararl("train", "--resume", str(run), "--total-steps", "1500")
    assert result.returncode == 0, result.stderr
    assert steps_of(ckpts / "final.pt") >= 1500
    assert steps_of(ckpts / "final.pt") - 1000 < 700  # continued from 1,000, not from the start


def test_resumed_metrics_have_no_step_twice(tiny_run: Path, tmp_path: Path, pararl: Any) -> None:
    run = run_copy(tiny_run, tmp_path)
    for name in ("final", "best"):
        (run / "checkpoints" / f"{name}.pt").unlink()  # as if killed after step_800
    resumed_from = max(steps_of(p) for p in (run / "checkpoints").glob("step_*.pt"))
    assert pararl("train", "--resume", str(run)).returncode == 0
    steps = metric_steps(run)
    # rows past the checkpoint were dropped, then redone; the checkpoint's own not twice
    assert steps == sorted(set(steps)), steps
    assert max(steps)[0] >= 1000
    assert resumed_from < 1000


def test_a_solved_run_given_more_steps_trains_them(
    tiny_run: Path, tmp_path: Path, pararl: Any
) -> None:
    """Its target would end it at the first evaluation: resumed with a larger budget
    (and no --target-return), it trains the budget, and says so."""
    run = run_copy(tiny_run, tmp_path)
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "target_return": -1000.0}))
    final = run / "checkpoints" / "final.pt"
    checkpoint.save(final, {**checkpoint.load(final), "status": "solved"})
    more = pararl("train", "--resume", str(run), "--total-steps", "2000")
    assert more.returncode == 0, more.stderr
    assert "this run was solved (target -1000); given more steps, it trains them all" in (
        more.stderr
    )
    assert "step budget reached" in more.stderr
    assert steps_of(final) >= 2000
    # and at the next resume too: the target stays dropped until one is given
    again = pararl("train", "--resume", str(run), "--total-steps", "3000")
    assert again.returncode == 0, again.stderr
    assert "step budget reached" in again.stderr
    assert steps_of(final) >= 3000
    target = pararl(
        "train", "--resume", str(run), "--total-steps", "4000", "--target-return", "-1000"
    )
    assert target.returncode == 0, target.stderr
    assert "pararl: solved after" in target.stderr


def test_options_on_resume_apply_or_are_refused(
    tiny_run: Path, tmp_path: Path, pararl: Any
) -> None:
    run = run_copy(tiny_run, tmp_path)
    finished = pararl("train", "--resume", str(run))
    assert finished.returncode == 0
    assert "is finished" in finished.stderr
    lower = pararl("train", "--resume", str(run), "--total-steps", "500")
    assert lower.returncode == 0
    assert "nothing to do" in lower.stderr
    refused = pararl("train", "--resume", str(run), "--lr", "0.5", "--total-steps", "2000")
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "--lr" in refused.stderr
    env = pararl("train", "--resume", str(run), "--env", "Acrobot-v1", "--total-steps", "2000")
    assert env.returncode == 2
    assert "--env" in env.stderr
    elsewhere = pararl("train", "--resume", str(run), "--run-dir", str(tmp_path / "other"))
    assert elsewhere.returncode == 2
    assert "a resumed run goes on in its own directory" in elsewhere.stderr
    # a list option is shown as it would be given
    widths = json.loads((run / "config.json").read_text())["hidden"]
    hidden = pararl("train", "--resume", str(run), "--hidden", "7", "--total-steps", "2000")
    assert hidden.returncode == 2
    assert f"(--hidden {' '.join(map(str, widths))})" in hidden.stderr
    applied = pararl("train", "--resume", str(run), "--total-steps", "1400", "--eval-every", "700")
    assert applied.returncode == 0, applied.stderr
    saved = (run / "config.json").read_text()
    assert '"total_steps": 1400' in saved
    assert '"eval_every": 700' in saved
    assert steps_of(run / "checkpoints" / "final.pt") >= 1400


@pytest.mark.skipif(importlib.util.find_spec("Box2D") is not None, reason="Box2D is installed")
def test_a_missing_extra_is_named(tmp_path: Path, pararl: Any) -> None:
    result = pararl("train", "ppo", "--env", "CarRacing-v3", "--run-dir", str(tmp_path / "r"))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "gymnasium[box2d]" in result.stderr
    assert not (tmp_path / "r").exists()


def test_atari_without_ale_py_says_what_to_install(
    pararl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ale_py", None)  # as if it were not installed
    result = pararl("train", "dqn", "--env", "ALE/Pong-v5")
    assert result.returncode == 2
    assert "needs ale-py: pip install 'pararl[atari]'" in result.stderr


@pytest.mark.parametrize("width", [80, 50])
def test_progress_line_fits_and_ends_on_the_final_state(
    width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    console = Console(1_000_000, "bar", "ppo HalfCheetah-v5")
    console.update({"env_steps": 300_000, "steps_per_s": 3_200.0, "eval_return": 10.0})
    console.close(1_000_000, 3_780.4)
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    assert lines
    assert all(len(line) <= width for line in lines), lines
    assert "1,000,000/1,000,000" in lines[-1]
    assert "eval 3780.4" in lines[-1]
    if width >= 80:  # narrower: the title and the bar go first
        assert "ppo HalfCheetah" in lines[-1]
        assert "━" in lines[-1]


def test_evaluate_is_quick_and_checks_options_first(
    tiny_run: Path, tmp_path: Path, pararl: Any
) -> None:
    run = run_copy(tiny_run, tmp_path)
    torch.set_num_threads(2)
    assert pararl("evaluate", str(run), "--episodes", "2").returncode == 0
    assert torch.get_num_threads() == 1
    bad = pararl("evaluate", str(tmp_path / "nowhere"), "--video", "x.avi")
    assert bad.returncode == 2
    assert ".gif or .mp4" in bad.stderr


def test_render_without_a_display_is_refused(
    tmp_path: Path, pararl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    result = pararl("evaluate", str(tmp_path), "--render")
    if sys.platform.startswith("linux"):
        assert result.returncode == 2
        assert "needs a display" in result.stderr


def test_gif_plays_at_the_envs_frame_rate(tiny_run: Path, tmp_path: Path, pararl: Any) -> None:
    pytest.importorskip("imageio")
    pytest.importorskip("pygame")
    from PIL import Image

    run = run_copy(tiny_run, tmp_path)
    gif = tmp_path / "play.gif"
    result = pararl("evaluate", str(run), "--episodes", "1", "--video", str(gif))
    assert result.returncode == 0, result.stderr
    assert "XDG_RUNTIME_DIR" not in result.stderr
    durations = []
    with Image.open(gif) as image:
        for index in range(image.n_frames):
            image.seek(index)
            durations.append(image.info["duration"])
    # CartPole renders at 50 fps: 20 ms a frame (identical frames are merged)
    assert min(durations) == 20, durations
    assert all(d % 20 == 0 for d in durations), durations


def test_cli_edges(tmp_path: Path, pararl: Any) -> None:
    version = pararl("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("pararl ")
    assert pararl("train").returncode == 2
    listing = pararl("train", "--help")
    assert listing.returncode == 0
    bench = pararl("bench", "--help")
    assert bench.returncode == 2
    assert "python -m benchmarks" in bench.stderr
    bad = pararl("train", "dqn", "--total-steps", "abc")
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "--total-steps" in bad.stderr
    if not torch.cuda.is_available():
        gpu = pararl("train", "dqn", "--device", "cuda", "--run-dir", str(tmp_path / "g"))
        assert gpu.returncode == 2
        assert not (tmp_path / "g").exists()


def test_short_run_messages_and_too_many_workers(tmp_path: Path, pararl: Any) -> None:
    workers = str(physical_cores() + 1)
    synced = ["sync" if a == "serial" else a for a in TINY]  # worker processes (serial: none)
    result = pararl(
        "train", "dqn", *synced, "--eval-every", "100000", "--workers", workers,
        "--run-dir", str(tmp_path / "r"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "-inf" not in result.stderr
    # no evaluation fell due: said at start, and the final weights are evaluated
    assert (
        "an evaluation every 100,000 env steps (--eval-every) reaches past the budget "
        "(--total-steps 1,000)" in result.stderr
    )
    assert "(best eval " in result.stderr.splitlines()[-1]
    assert f"--workers {workers} is more than" in result.stderr


def test_async_budget_overshoot_is_at_most_one_chunk(tmp_path: Path, pararl: Any) -> None:
    run = tmp_path / "run"
    args = ["--mode", "async", "--workers", "3", "--total-steps", "1500", "--eval-every", "1500"]
    result = pararl("train", "dqn", *args, "--eval-episodes", "1", "--run-dir", str(run))
    assert result.returncode == 0, result.stderr
    assert steps_of(run / "checkpoints" / "final.pt") <= 1500 + 256 + 4  # one chunk of 4 envs
