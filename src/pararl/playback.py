"""`pararl evaluate RUN_DIR`: load a run's checkpoint with its config, report the
greedy return, and optionally show it on screen or record a video."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pararl import checkpoint, seeding
from pararl.config import RunConfig
from pararl.envs.make import env_factory
from pararl.errors import UsageError
from pararl.evaluation.greedy import Evaluator, Policy
from pararl.playback_config import EvaluateConfig
from pararl.registry import algorithm_of, config_from_json
from pararl.rundir import RunDir


def load_policy(run: RunDir, name: str) -> tuple[RunConfig, Policy]:
    if not run.config.is_file():
        raise UsageError(f"{run.root} is not a pararl run directory (no config.json)")
    config = config_from_json(run.config.read_text())
    state = checkpoint.load(run.checkpoint(name))
    return config, algorithm_of(config).greedy_policy(config, state).greedy


def _play(
    config: RunConfig, policy: Policy, episodes: int, seed: int, render_mode: str
) -> tuple[list[float], list[Any]]:
    """Episodes one at a time in a rendering env; frames of the first when rgb_array."""
    env = env_factory(config.env, render_mode=render_mode)()
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
    return returns, frames


def write_video(frames: list[Any], path: Path, fps: int = 30) -> None:
    import imageio.v2 as imageio

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".gif":
        imageio.mimsave(path, frames, duration=1 / fps, loop=0)
    elif path.suffix.lower() == ".mp4":
        imageio.mimsave(path, frames, fps=fps)
    else:
        raise UsageError(f"--video {path}: use a .gif or .mp4 file name")


def run(cfg: EvaluateConfig) -> dict[str, float]:
    if cfg.episodes < 1:
        raise UsageError("--episodes must be >= 1")
    config, policy = load_policy(RunDir(cfg.run_dir), cfg.checkpoint)
    if cfg.render or cfg.video is not None:
        returns, frames = _play(
            config, policy, cfg.episodes, cfg.seed, "human" if cfg.render else "rgb_array"
        )
        if cfg.video is not None:
            write_video(frames, cfg.video)
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
