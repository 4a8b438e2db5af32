"""`pararl evaluate`: greedy return from a run's checkpoint, and a recorded video."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pararl import DQNConfig, train
from pararl.cli import main
from pararl.runners import session


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, quiet_runs: dict[str, Any]) -> Path:
    run = tmp_path_factory.mktemp("eval") / "run"
    with pytest.MonkeyPatch.context() as patch:  # a run that draws its curve (conftest.py)
        patch.setattr(session, "learning_curve", quiet_runs["learning_curve"])
        train(
            DQNConfig(
                mode="serial",
                run_dir=run,
                total_steps=400,
                learning_starts=100,
                eval_every=400,
                eval_episodes=2,
                tensorboard=True,
                progress="none",
                workers=1,
                envs_per_worker=2,
                hidden=(16,),
                batch_size=16,
            )
        )
    return run


def test_run_dir_has_everything(run_dir: Path) -> None:
    for name in (
        "config.json",
        "metrics.csv",
        "learning_curve.png",
        "checkpoints/best.pt",
        "checkpoints/final.pt",
    ):
        assert (run_dir / name).is_file(), name
    assert any((run_dir / "tb").iterdir())


def test_evaluate_prints_mean_and_std(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", str(run_dir), "--episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert "mean return" in out
    assert "over 3 episodes" in out


def test_evaluate_records_a_gif(run_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("pygame")
    video = tmp_path / "episode.gif"
    assert main(["evaluate", str(run_dir), "--episodes", "1", "--video", str(video)]) == 0
    assert video.stat().st_size > 1000
    assert video.read_bytes()[:3] == b"GIF"


def test_a_video_that_cannot_be_written_is_refused_before_playing(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    for video, says in ((blocked / "x.gif", "cannot make its directory"),
                        (tmp_path, "use a .gif")):  # fmt: skip
        assert main(["evaluate", str(run_dir), "--video", str(video)]) == 2
        err = capsys.readouterr().err
        assert says in err
        assert len(err.strip().splitlines()) == 1, err
    folder = tmp_path / "clip.gif"
    folder.mkdir()
    assert main(["evaluate", str(run_dir), "--video", str(folder)]) == 2
    assert "is a directory" in capsys.readouterr().err


@pytest.mark.parametrize(("display", "expected"), [(None, "egl"), (":0", None)])
def test_off_screen_frames_render_mujoco_through_egl_without_a_display(
    monkeypatch: pytest.MonkeyPatch, display: str | None, expected: str | None
) -> None:
    """MuJoCo's default renderer (GLFW) needs a display: a video of a MuJoCo run on a
    machine without one renders through EGL; with a display, MuJoCo chooses."""
    import os

    from pararl.playback import quiet_sdl

    monkeypatch.delenv("MUJOCO_GL", raising=False)
    if display is None:
        monkeypatch.delenv("DISPLAY", raising=False)
    else:
        monkeypatch.setenv("DISPLAY", display)
    quiet_sdl("rgb_array")
    assert os.environ.get("MUJOCO_GL") == expected
    monkeypatch.delenv("MUJOCO_GL", raising=False)


def test_an_mp4_keeps_the_frames_size(tmp_path: Path) -> None:
    """CartPole's 600x400 frames stay 600x400 (sides need only be even for H.264)."""
    import warnings

    import imageio.v2 as imageio
    import numpy as np

    from pararl.playback import write_video

    frames = [np.full((400, 600, 3), i, np.uint8) for i in range(3)]
    path = tmp_path / "v.mp4"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # imageio's resize warning would fail it
        write_video(frames, path, fps=30)
    assert imageio.get_reader(path).get_data(0).shape == (400, 600, 3)
