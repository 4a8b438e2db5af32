"""`pararl evaluate RUN_DIR`: load a run's checkpoint with its config, report the
greedy return, and optionally show it on screen or record a video."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from pararl import checkpoint, seeding
from pararl.config import EvaluateConfig, RunConfig, config_from_json
from pararl.envs.make import env_factory
from pararl.errors import UsageError
from pararl.evaluation.greedy import Evaluator, Policy
from pararl.registry import algorithm_of, algorithm_of_run
from pararl.rundir import RunDir


def load_policy(run: RunDir, name: str) -> tuple[RunConfig, Policy]:
    if not run.config.is_file():
        raise UsageError(f"{run.root} is not a pararl run directory (no config.json)")
    config = config_from_json(run.config.read_text())
    state = checkpoint.load(run.checkpoint(name))
    return config, algorithm_of(config).greedy_policy(config, state).greedy


def _play(
    config: RunConfig, policy: Policy, episodes: int, seed: int, render_mode: str
) -> tuple[list[float], list[Any], float]:
    """Episodes one at a time in a rendering env; frames of the first when rgb_array,
    and the env's own frame rate (`metadata["render_fps"]`, 30 if it states none)."""
    env = env_factory(config.env, render_mode=render_mode)()
    fps = float(env.metadata.get("render_fps") or 30)
    returns, frames = [], []
    try:
        # the same episodes as a training run's first evaluation with this seed
        for ep, ep_seed in enumerate(seeding.env_seeds(seed, episodes, "eval", 0, 0)):
            obs, _ = env.reset(seed=ep_seed)
            total, done = 0.0, False
            while not done:
                if render_mode == "rgb_array" and ep == 0:
                    frames.append(env.render())
                action = policy(obs[None])[0]
                obs, reward, terminated, truncated, _ = env.step(
                    action.item() if action.ndim == 0 else action
                )
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
    finally:
        env.close()
    return returns, frames, fps


VIDEO_SUFFIXES = (".gif", ".mp4")


def write_video(frames: list[Any], path: Path, fps: float = 30.0) -> None:
    """Frames at `fps` (GIF frame delays are whole milliseconds)."""
    import imageio.v2 as imageio

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".gif":
        imageio.mimsave(path, frames, duration=round(1000 / fps), loop=0)
    else:
        imageio.mimsave(path, frames, fps=fps)


def check(cfg: EvaluateConfig) -> None:
    """Every option, before any episode is played."""
    if cfg.episodes < 1:
        raise UsageError("--episodes must be >= 1")
    if cfg.threads < 1:
        raise UsageError("--threads must be >= 1")
    if cfg.video is not None and cfg.video.suffix.lower() not in VIDEO_SUFFIXES:
        raise UsageError(f"--video {cfg.video}: use a .gif or .mp4 file name")
    if cfg.video is not None and cfg.render:
        raise UsageError("--render and --video: choose one (show the episodes, or record one)")
    if cfg.render and sys.platform.startswith("linux"):
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            raise UsageError("--render needs a display (no DISPLAY here); use --video FILE.gif")


def quiet_sdl(render_mode: str) -> None:
    """No audio device, and no window for off-screen frames: pygame's SDL then
    starts without complaining (e.g. about XDG_RUNTIME_DIR)."""
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    if render_mode == "rgb_array":
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = Path(tempfile.gettempdir()) / f"pararl-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)


def run(cfg: EvaluateConfig) -> dict[str, float]:
    import torch

    check(cfg)
    torch.set_num_threads(cfg.threads)
    own = algorithm_of_run(cfg.run_dir).evaluation if RunDir(cfg.run_dir).config.is_file() else None
    if own is not None:  # an algorithm with an evaluation of its own (MAML: adaptation)
        return own(cfg, write_video)
    config, policy = load_policy(RunDir(cfg.run_dir), cfg.checkpoint)
    if cfg.render or cfg.video is not None:
        mode = "human" if cfg.render else "rgb_array"
        quiet_sdl(mode)
        returns, frames, fps = _play(config, policy, cfg.episodes, cfg.seed, mode)
        if cfg.video is not None:
            write_video(frames, cfg.video, fps)
            print(f"video of episode 1 written to {cfg.video}")
        result = np.asarray(returns)
    else:
        evaluator = Evaluator(env_factory(config.env), cfg.episodes, cfg.seed, stream=(0,))
        try:
            result = evaluator.run(policy)
        finally:
            evaluator.close()
    mean, std = float(result.mean()), float(result.std())
    print(
        f"{config.env}: mean return {mean:.1f} ± {std:.1f} over {cfg.episodes} episodes "
        f"({cfg.checkpoint} checkpoint of {cfg.run_dir})"
    )
    return {"mean": mean, "std": std}
