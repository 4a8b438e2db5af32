"""Atari games by name, with the field's standard preprocessing.

`ALE/Pong-v5`, `PongNoFrameskip-v4` and every other id whose entry point is ale-py
get, inside the worker that steps them: frame skip 4 with a max over the last two
frames, up to 30 no-op actions at reset, FIRE at reset for games that need it,
84×84 grayscale (area resize), a stack of the last 4 frames as `uint8`, no sticky
actions and a 108,000-frame cap, which are EnvPool's and ale-py's defaults. Training
envs also end an episode at each life lost (the game plays on: the next reset is a
no-op step, as in EnvPool and SB3, not a new game) and clip rewards to their sign;
evaluation envs do neither, so they report the real game score.

Where the references differ (see docs/guides/images.md): the no-op count is drawn from 1–30
(Gymnasium's and EnvPool's rule; ALE's own vector env draws 0–29); the stack starts
as copies of the reset frame (Gymnasium and EnvPool; ALE pads with zeros); a lost life
ends a training episode without restarting the game (EnvPool; ALE's `episodic_life`
restarts it). The preprocessing is Gymnasium's own `AtariPreprocessing` and
`FrameStackObservation`, so pararl's frames equal theirs frame for frame; in a
pararl vector env the stack is kept in shared memory as a ring of frames
(`pararl.vector.frame_ring`), so a step writes one new 84×84 frame, not four.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np


@dataclass(frozen=True)
class AtariOptions:
    """The preprocessing of an Atari env (EnvPool's and ale-py's defaults)."""

    frame_skip: int = 4
    noop_max: int = 30
    screen_size: int = 84
    grayscale: bool = True
    stack: int = 4
    sticky_actions: float = 0.0  # `gym.make("ALE/...-v5")` alone would use 0.25
    fire_reset: bool = True
    max_frames: int = 108_000
    episodic_life: bool = False  # training envs: True
    clip_reward: bool = False  # training envs: True

    @classmethod
    def for_training(cls, training: bool) -> AtariOptions:
        return cls(episodic_life=training, clip_reward=training)


def register_atari() -> bool:
    """Register ale-py's games with Gymnasium, if ale-py is installed; ALE's own log
    keeps its warnings and errors, not the banner each env would print at start."""
    try:
        with warnings.catch_warnings():
            # a process that already holds ALE's specs (the evaluation process of a
            # resumed run) would be told each one is overridden with itself
            warnings.filterwarnings("ignore", message=".*Overriding environment ALE/")
            import ale_py
    except ImportError:
        return False
    gym.register_envs(ale_py)
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)
    return True


def is_atari(env_id: str) -> bool:
    """Whether `env_id` is an ale-py game (registered once ale-py is imported)."""
    if env_id.startswith("ALE/"):
        return True
    try:
        return str(gym.spec(env_id).entry_point).startswith("ale_py")
    except gym.error.Error:
        return False


class EpisodicLife(gym.Wrapper[np.ndarray, int, np.ndarray, int]):
    """A lost life ends the episode; the game itself goes on. `reset` restarts the
    game only when it is over, and otherwise takes one no-op step from where the
    last life was lost (DeepMind's, EnvPool's and SB3's rule)."""

    def __init__(self, env: gym.Env[np.ndarray, int]) -> None:
        super().__init__(env)
        self._lives = 0
        self._game_over = True

    def _ale_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())  # type: ignore[attr-defined]

    def step(self, action: int) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = terminated or truncated
        lives = self._ale_lives()
        if 0 < lives < self._lives:
            terminated = True
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if self._game_over or seed is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the no-op ended the game: a real reset
                obs, info = self.env.reset(options=options)
        self._game_over = False
        self._lives = self._ale_lives()
        return obs, info


class FireReset(gym.Wrapper[np.ndarray, int, np.ndarray, int]):
    """Press FIRE at reset, for games that wait for it (Breakout, ...)."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        for action in (1, 2):  # FIRE, then a move some games need to start
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(options=options)
        return obs, info


class Preprocessing(gym.wrappers.AtariPreprocessing):
    """Gymnasium's `AtariPreprocessing` whose step drives the emulator itself.

    Gymnasium's step calls the env under it once per frame: four `AtariEnv.step`
    calls, each copying an RGB screen nobody reads and building an info dict, through
    the checker wrappers (71 µs of a 313 µs agent step on Pong, `python -m benchmarks
    atari`). This step makes the same emulator calls through ALE's public interface
    (`act`, `game_over`, the two grayscale screen reads of the max-pool) and returns
    the same frames, rewards, flags and info; reset is Gymnasium's own.
    """

    def __init__(self, env: gym.Env[Any, Any], **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        ale = self.ale
        actions = ale.getMinimalActionSet()
        if len(actions) != env.action_space.n:  # type: ignore[attr-defined]
            actions = ale.getLegalActionSet()  # full_action_space=True
        self._actions = list(actions)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        ale, code, skip = self.ale, self._actions[int(action)], self.frame_skip
        total_reward, terminated, truncated = 0.0, False, False
        for t in range(skip):
            total_reward += ale.act(code, 1.0)
            terminated = ale.game_over(with_truncation=False)
            truncated = ale.game_truncated()
            self.game_over = terminated
            if terminated or truncated:
                break
            if t == skip - 2:
                ale.getScreenGrayscale(self.obs_buffer[1])
            elif t == skip - 1:
                ale.getScreenGrayscale(self.obs_buffer[0])
        info = {
            "lives": ale.lives(),
            "episode_frame_number": ale.getEpisodeFrameNumber(),
            "frame_number": ale.getFrameNumber(),
        }
        return self._get_obs(), total_reward, terminated, truncated, info


def clipped(reward: SupportsFloat) -> float:
    """The reward's sign: -1, 0 or 1."""
    return float(np.sign(float(reward)))


def needs_fire(env: gym.Env[Any, Any]) -> bool:
    meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]
    return len(meanings) >= 3 and meanings[1] == "FIRE"


def make_atari(
    env_id: str, options: AtariOptions, kwargs: dict[str, Any] | None = None
) -> gym.Env[np.ndarray, int]:
    """The game `env_id` with `options`' preprocessing; `RecordEpisodeStatistics`
    sits under the life and reward wrappers, so it reports whole games' real scores
    (and lengths in agent steps). `kwargs` (`render_mode`, the user's) go to
    `gym.make` after pararl's own, so the user's win."""
    if not register_atari():
        raise ImportError("ale-py is not installed: pip install 'pararl[atari]'")
    made: dict[str, Any] = {
        "frameskip": 1,  # the skip (with its max-pool) is AtariPreprocessing's
        "repeat_action_probability": options.sticky_actions,
        "max_num_frames_per_episode": options.max_frames,
        **(kwargs or {}),
    }
    env: gym.Env[Any, Any] = gym.make(env_id, **made)
    preprocess = Preprocessing if options.grayscale else gym.wrappers.AtariPreprocessing
    env = preprocess(
        env,
        noop_max=options.noop_max,
        frame_skip=options.frame_skip,
        screen_size=options.screen_size,
        grayscale_obs=options.grayscale,
        scale_obs=False,  # uint8 frames: the learner scales them
    )
    env = gym.wrappers.RecordEpisodeStatistics(env)  # agent steps, whole games
    if options.episodic_life:
        env = EpisodicLife(env)
    if options.fire_reset and needs_fire(env):
        env = FireReset(env)
    if options.clip_reward:
        env = gym.wrappers.TransformReward(env, clipped)
    return gym.wrappers.FrameStackObservation(env, options.stack)
