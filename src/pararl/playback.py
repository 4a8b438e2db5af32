"""`pararl evaluate RUN_DIR` (and `pararl.evaluate`): load a run's agent
(`pararl.agent`), report the greedy return, and optionally show it on screen or
record a video. Every episode ends: one still running after `--max-steps` steps is
cut there and reported as truncated."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from pararl.agent import Agent, load
from pararl.config import EvaluateConfig
from pararl.config.env_source import EnvArg
from pararl.config.saved import saved_facts
from pararl.envs.make import check_env_id, env_factory
from pararl.envs.masks import MASK_KEY
from pararl.errors import UsageError
from pararl.evaluation.episodes import (
    Episodes,
    Evaluator,
    episode_cap,
    eval_seeds,
    progress_notes,
)
from pararl.registry import algorithm_of_run
from pararl.rundir import RunDir
from pararl.scores import agent_settings

FIRST_RUN = (0,)  # the evaluations' stream of a run from step 0: its episodes are played


def _play(
    agent: Agent,
    episodes: int,
    seed: int,
    render_mode: str,
    max_steps: int,
    deterministic: bool = True,
) -> tuple[Episodes, list[Any], float]:
    """Episodes one at a time in a rendering env, each for at most `max_steps`
    steps; frames of the first when rgb_array, and the env's own frame rate
    (`metadata["render_fps"]`, 30 if it states none)."""
    env = agent.make_env(render_mode)
    fps = float(env.metadata.get("render_fps") or 30)
    returns, lengths, truncated, capped, frames = [], [], [], [], []
    try:
        # the same episodes as a training run's first evaluation with this seed
        for ep, ep_seed in enumerate(eval_seeds(seed, episodes, FIRST_RUN)):
            obs, info = env.reset(seed=ep_seed)
            agent.reset()
            total, steps, ended, cut = 0.0, 0, False, False
            while not ended:
                if render_mode == "rgb_array" and ep == 0:
                    frames.append(env.render())
                action = agent.act(obs, deterministic, info.get(MASK_KEY))
                obs, reward, terminated, trunc, info = env.step(action)
                total, steps = total + float(reward), steps + 1
                cut = trunc and not terminated
                ended = terminated or trunc or steps >= max_steps
            returns.append(total)
            lengths.append(steps)
            capped.append(not (terminated or trunc))
            truncated.append(cut or capped[-1])
    finally:
        env.close()
    result = Episodes(
        np.asarray(returns),
        np.asarray(lengths),
        np.asarray(truncated),
        np.asarray(capped),
        max_steps,
    )
    return result, frames, fps


VIDEO_SUFFIXES = (".gif", ".mp4")


def write_video(frames: list[Any], path: Path, fps: float = 30.0) -> None:
    """Frames at `fps` (GIF frame delays are whole milliseconds)."""
    import imageio.v2 as imageio

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".gif":
        imageio.mimsave(path, frames, duration=round(1000 / fps), loop=0)
    else:
        # H.264 in yuv420p needs even sides only: frames of even size are kept as they
        # are (imageio's default of 16 rescaled a 600x400 CartPole frame, and said so)
        imageio.mimsave(path, frames, fps=fps, macro_block_size=2)


def check(cfg: EvaluateConfig) -> None:
    """Every option, before any episode is played."""
    if cfg.episodes < 1:
        raise UsageError("--episodes must be >= 1")
    if cfg.threads < 1:
        raise UsageError("--threads must be >= 1")
    if cfg.max_steps is not None and cfg.max_steps < 1:
        raise UsageError("--max-steps must be >= 1")
    if cfg.video is not None and cfg.video.suffix.lower() not in VIDEO_SUFFIXES:
        raise UsageError(f"--video {cfg.video}: use a .gif or .mp4 file name")
    if cfg.video is not None and cfg.render:
        raise UsageError("--render and --video: choose one (show the episodes, or record one)")
    if cfg.video is not None:
        _check_writable(cfg.video)
    if cfg.render and sys.platform.startswith("linux"):
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            raise UsageError("--render needs a display (no DISPLAY here); use --video FILE.gif")


def _check_writable(video: Path) -> None:
    """The video's file can be written (its directory made, if new): found out before
    the episodes play, not after."""
    try:
        video.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise UsageError(f"--video {video}: cannot make its directory ({why}); "
                         "choose a path you can write") from None  # fmt: skip
    if video.is_dir() or not os.access(video.parent, os.W_OK):
        what = "is a directory" if video.is_dir() else f"{video.parent} is not writable"
        raise UsageError(f"--video {video}: {what}; choose a file in a directory you can write")


def quiet_sdl(render_mode: str) -> None:
    """No audio device, and no window for off-screen frames: pygame's SDL then
    starts without complaining (e.g. about XDG_RUNTIME_DIR), and MuJoCo renders
    through EGL where there is no display (its default, GLFW, needs one)."""
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    if render_mode == "rgb_array":
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        if not os.environ.get("DISPLAY"):  # MuJoCo's frames: rendered off-screen
            os.environ.setdefault("MUJOCO_GL", "egl")
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = Path(tempfile.gettempdir()) / f"pararl-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)


def run(cfg: EvaluateConfig, env: EnvArg | None = None) -> dict[str, float]:
    """Evaluate as `cfg` says; print the result and return it (mean and std of the
    return, episodes, how many were truncated). `env`: the env to evaluate in
    instead of the run's (from Python: a run whose env a factory built needs it)."""
    import torch

    check(cfg)
    torch.set_num_threads(cfg.threads)
    own = algorithm_of_run(cfg.run_dir).evaluation if RunDir(cfg.run_dir).config.is_file() else None
    if own is not None:  # an algorithm with an evaluation of its own (MAML: adaptation)
        if env is not None:
            raise UsageError("env=: a MAML run is evaluated on its own tasks, by their id")
        return own(cfg, write_video)
    agent = load(
        cfg.run_dir,
        cfg.checkpoint,
        seed=cfg.seed,
        trust_checkpoint=cfg.trust_checkpoint,
        env=env,
        agent=cfg.agent,
    )
    config = agent.config
    if isinstance(config.env, str):  # the episodes need it (`load` alone does not)
        found = saved_facts(cfg.run_dir).get("env_module_dir")
        named = Path(cfg.run_dir)
        check_env_id(config.env, [found] if found else [], named, cfg.trust_checkpoint)
    actions = config.eval_actions if cfg.actions == "run" else cfg.actions
    deterministic = actions == "greedy"
    cap = cfg.max_steps or saved_facts(cfg.run_dir).get("eval_max_steps")
    cap = int(cap or episode_cap(config.env, config.env_kwargs, None))
    if cfg.render or cfg.video is not None:
        mode = "human" if cfg.render else "rgb_array"
        quiet_sdl(mode)
        episodes, frames, fps = _play(agent, cfg.episodes, cfg.seed, mode, cap, deterministic)
        if cfg.video is not None:
            write_video(frames, cfg.video, fps)
            print(f"video of episode 1 written to {cfg.video}")
    else:
        env_fn = env_factory(config.env, kwargs=config.env_kwargs)
        evaluator = Evaluator(
            env_fn,
            cfg.episodes,
            cfg.seed,
            stream=FIRST_RUN,
            max_steps=cap,
            actions=actions,
            epsilon=agent.draws.epsilon,
        )
        try:
            say = functools.partial(print, file=sys.stderr, flush=True)
            progress = progress_notes(say, f"{cfg.episodes} episodes of {config.env}")
            episodes = evaluator.run(agent.policy, progress)
        finally:
            evaluator.close()
    truncated = int(episodes.truncated.sum())
    plural = "s" if cfg.episodes != 1 else ""
    whose = ""
    if cfg.agent is not None:
        listed = agent_settings(cfg.run_dir)
        swept = listed[cfg.agent] if cfg.agent < len(listed) else {}
        settings = "".join(f", {k}={_shown(v)}" for k, v in swept.items() if k != "seed")
        whose = f", agent {cfg.agent}, seed {config.seed}{settings}"  # a sweep's: its own
    print(
        f"{config.env}: mean return {episodes.mean:.1f} ± {episodes.std:.1f} over "
        f"{cfg.episodes} episode{plural}{'' if deterministic else ', actions sampled'} "
        f"({cfg.checkpoint} checkpoint of {cfg.run_dir}"
        + whose
        + ")"
        + (f"; {truncated} truncated" if truncated else "")
    )
    note = episodes.cap_note().replace("--eval-max-steps", "--max-steps")
    if note:
        print(f"pararl: {note}", file=sys.stderr)
    return {
        "mean": episodes.mean,
        "std": episodes.std,
        "episodes": cfg.episodes,
        "truncated": truncated,
    }


def _shown(value: object) -> str:
    """A swept setting as `--sweep` takes it (3e-4, not 0.00030000000000000003)."""
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)
