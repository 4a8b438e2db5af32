"""MinAtar games by name: `MinAtar/Breakout-v1`, `MinAtar/SpaceInvaders-v1`, ...

MinAtar (Young & Tian 2019, `pip install 'pararl[minatar]'`) is five Atari games on a
10x10 grid: an observation is a `bool` array `[10, 10, C]`, one channels-last plane per
kind of object (Breakout 4, Space Invaders 6, Asterix 4, Seaquest 10, Freeway 7),
given to the networks as it is (`pararl.images`). `-v1` ids have each game's minimal
action set, `-v0` all six actions.

Sticky actions at 0.1, as in the MinAtar paper: with that probability each step
repeats the previous action. It is MinAtar's own default and applies to the training
envs and to the evaluation envs alike (the paper's returns are measured with them).
Difficulty ramping is on (MinAtar's default). Frames for `--video` are drawn here
(`MinAtarFrames`), so the package's plotting dependencies (seaborn, matplotlib) are
not needed; at run time MinAtar needs only NumPy.
"""

from __future__ import annotations

import logging
from typing import Any

import gymnasium as gym
import numpy as np

from pararl.errors import UsageError

STICKY_ACTIONS = 0.1  # MinAtar paper, and the package's default
PREFIX = "MinAtar/"
# every id `minatar.gym.register_envs` registers: each game with all six actions
# (-v0) and with its minimal set (-v1)
GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
IDS = tuple(f"{PREFIX}{game}-v{version}" for game in GAMES for version in (0, 1))
CELL = 16  # pixels per grid cell in rendered frames

# one colour per object plane (as many as Seaquest's 10), on black
PALETTE = np.array(
    [
        (230, 230, 230), (220, 60, 60), (60, 140, 230), (240, 200, 60), (80, 200, 120),
        (200, 90, 220), (250, 140, 50), (120, 220, 230), (160, 120, 80), (250, 120, 170),
    ],
    dtype=np.uint8,
)  # fmt: skip


def register_minatar() -> bool:
    """Register MinAtar's games with Gymnasium, if `minatar` is installed. Imported
    here, quietly, even where the ids are registered already (a spawned process that
    got the spec): its import warns that seaborn is missing, which pararl does not
    need. MinAtar registers all its games at once, so a process that holds some
    of them already (the evaluation process is given the run's game's spec,
    `evaluation.serve`) registers them with those set aside and put back:
    Gymnasium warns of every id registered twice."""
    logging.disable(logging.WARNING)
    try:
        import minatar.gym
    except ImportError:
        return False
    finally:
        logging.disable(logging.NOTSET)
    if any(env_id not in gym.registry for env_id in IDS):
        held = {env_id: gym.registry.pop(env_id) for env_id in IDS if env_id in gym.registry}
        try:
            minatar.gym.register_envs()
        finally:
            gym.registry.update(held)
    return True


def is_minatar(env_id: str) -> bool:
    return env_id.startswith(PREFIX)


class MinAtarFrames(gym.Wrapper[np.ndarray, int, np.ndarray, int]):
    """`render()` as RGB uint8 frames: each object plane in its colour, each grid cell
    `CELL` pixels wide (the first plane wins where objects overlap). Also takes the
    64-bit seeds pararl resets with (MinAtar's generator wants 32)."""

    def __init__(self, env: gym.Env[np.ndarray, int]) -> None:
        super().__init__(env)
        self._state: np.ndarray | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:  # MinAtar seeds a legacy RandomState: 32 bits, mixed
            seed = int(np.random.SeedSequence(seed).generate_state(1)[0])
        obs, info = self.env.reset(seed=seed, options=options)
        self._state = obs
        return obs, info

    def step(self, action: int) -> tuple[np.ndarray, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._state = obs
        return obs, reward, terminated, truncated, info

    def render(self) -> Any:
        if self._state is None:
            raise gym.error.ResetNeeded("call reset() before render()")
        planes = self._state.astype(bool)
        frame = np.zeros((*planes.shape[:2], 3), np.uint8)
        for channel in reversed(range(planes.shape[-1])):
            frame[planes[..., channel]] = PALETTE[channel % len(PALETTE)]
        return np.repeat(np.repeat(frame, CELL, axis=0), CELL, axis=1)


def make_minatar(env_id: str, kwargs: dict[str, Any] | None = None) -> gym.Env[np.ndarray, int]:
    """The game `env_id` with sticky actions 0.1, episode statistics, and frames
    drawn by pararl when `render_mode` is `rgb_array`. `kwargs` (`render_mode`, the
    user's) go to `gym.make` after pararl's own, so the user's win."""
    if not register_minatar():
        raise ImportError("minatar is not installed: pip install 'pararl[minatar]'")
    made: dict[str, Any] = {"sticky_action_prob": STICKY_ACTIONS, **(kwargs or {})}
    if made.get("render_mode") not in (None, "rgb_array"):
        raise UsageError(
            "MinAtar games are drawn into video frames only: use --video FILE.gif, not --render"
        )
    env: gym.Env[Any, Any] = gym.make(env_id, **made)
    env = MinAtarFrames(env)
    env.metadata = {**env.metadata, "render_fps": 10}
    return gym.wrappers.RecordEpisodeStatistics(env)


__all__ = ["STICKY_ACTIONS", "MinAtarFrames", "is_minatar", "make_minatar", "register_minatar"]
