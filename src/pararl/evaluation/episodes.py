"""Evaluation: N episodes at once, one per env of a serial vector env, acting
greedily (the argmax, the Gaussian's mean: the default) or with actions sampled from
the policy (`--eval-actions sampled`, PPO and SAC), drawn from the evaluations' own
random stream, so that training's draws do not depend on them.

`Evaluator` runs them in the calling process. `BackgroundEvaluator`
(`pararl.evaluation.background`) runs the same code in a child process so that training goes
on meanwhile; both answer `submit` / `poll`, so the session treats them alike.

An env that gives action masks (`envs.masks`) has its policy act within them.

Every evaluation ends: an episode still running after `max_steps` steps is cut
there and reported as truncated (its return so far counts). A greedy policy can
stay alive for ever in an env without a time limit (MinAtar's, or a user's), and
an evaluation that never ends would stall the run at every evaluation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from pararl import seeding
from pararl.envs.masks import batch_mask
from pararl.envs.modules import split_env_id
from pararl.models.acting import Draws, Mode, Policy, PopulationDraws, starts
from pararl.vector import SerialVectorEnv

EvalActions = Mode

# The longest evaluation episode of an env without a time limit of its own: an
# Atari game's cap (108,000 frames at frame skip 4, Machado et al. 2018).
DEFAULT_EPISODE_CAP = 27_000
PROGRESS_EVERY_S = 2.0  # how often a running evaluation reports how far it is


def episode_cap(
    env: object, kwargs: Mapping[str, Any], configured: int | None, time_limit: int | None = None
) -> int:
    """The step cap of an evaluation episode: `configured` if set, else the env's
    own `max_episode_steps` (given to `gym.make`, or registered; for an env a
    factory builds, `time_limit`: its own `TimeLimit`'s), else `DEFAULT_EPISODE_CAP`."""
    if configured is not None:
        return configured
    if not isinstance(env, str):  # a factory: the keyword arguments are its own
        return time_limit or DEFAULT_EPISODE_CAP
    if kwargs.get("max_episode_steps"):
        return int(kwargs["max_episode_steps"])
    spec = gym.registry.get(split_env_id(env)[1])
    own = spec.max_episode_steps if spec is not None else None
    return int(own) if own else DEFAULT_EPISODE_CAP


@dataclass(frozen=True)
class Episodes:
    """One evaluation: each episode's return and length, whether it ended by
    truncation (the env's time limit, or the evaluation's cap), and whether the cap
    cut it."""

    returns: np.ndarray
    lengths: np.ndarray
    truncated: np.ndarray
    capped: np.ndarray
    cap: int

    @classmethod
    def of_returns(cls, returns: np.ndarray) -> Episodes:
        """Returns measured elsewhere (MAML's), with nothing known about how they ended."""
        returns = np.asarray(returns, np.float64).ravel()
        none = np.zeros(len(returns), bool)
        return cls(returns, np.zeros(len(returns), np.int64), none, none, 0)

    @property
    def mean(self) -> float:
        return float(self.returns.mean())

    @property
    def std(self) -> float:
        return float(self.returns.std())

    def split(self, agents: int) -> list[Episodes]:
        """A population's evaluation (`Evaluator` of several seeds) as each agent's
        episodes, agent i's the i-th block; one agent: itself."""
        if agents == 1:
            return [self]
        parts = zip(
            *(
                np.split(a, agents)
                for a in (self.returns, self.lengths, self.truncated, self.capped)
            ),
            strict=True,
        )
        return [Episodes(r, n, t, c, self.cap) for r, n, t, c in parts]

    def cap_note(self) -> str:
        """What the cap did, for the log ("" when it cut nothing)."""
        n = int(self.capped.sum())
        if n == 0:
            return ""
        return (
            f"{n} of {len(self.returns)} episodes reached the evaluation cap of "
            f"{self.cap:,} steps and were cut (truncated; their returns are partial; "
            "--eval-max-steps sets the cap)"
        )


@dataclass(frozen=True)
class Progress:
    """How far a running evaluation is: episodes ended, and steps taken (each
    running episode has taken that many)."""

    done: int
    episodes: int
    steps: int
    cap: int

    def text(self) -> str:
        return (
            f"{self.done}/{self.episodes} episodes ended, {self.steps:,} steps "
            f"(at most {self.cap:,})"
        )


ProgressFn = Callable[[Progress], None]
NOTE_EVERY_S = 10.0  # at most one note per this long on an evaluation that runs on


def progress_notes(say: Callable[[str], None], what: str) -> ProgressFn:
    """A `ProgressFn` that says how far the evaluation `what` is ("evaluating
    `what`: 7/20 episodes ended, ..."), at most once per `NOTE_EVERY_S`, the first
    as soon as a report arrives (one comes `PROGRESS_EVERY_S` after the start: a
    short evaluation says nothing)."""
    started, last = time.monotonic(), -float("inf")

    def note(progress: Progress) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= NOTE_EVERY_S:
            last = now
            say(f"pararl: evaluating {what}: {progress.text()}, {now - started:.0f} s")

    return note


def action_draws(
    actions: EvalActions, seed: int, stream: tuple[int, ...], epsilon: float = 0.0
) -> Draws:
    """The streams sampled evaluations draw from: numpy's and torch's, the sub-streams
    0 and 1 of `("eval-actions", *stream)` of the run's seed; `epsilon`: a Q-policy's
    (greedy ones draw nothing)."""
    import torch  # the evaluations' own torch stream

    if actions == "greedy":
        return Draws(epsilon=epsilon)
    generator = torch.Generator().manual_seed(seeding.integer(seed, "eval-actions", *stream, 1))
    return Draws(seeding.generator(seed, "eval-actions", *stream, 0), generator, epsilon)


def eval_seeds(seed: int, episodes: int, stream: tuple[int, ...] = (), call: int = 0) -> list[int]:
    """Reset seeds of the episodes of evaluation `call` (0: the first) of an evaluator
    on `stream`: the stream `("eval", *stream, call)` of the run's seed. A training
    run's `stream` is the env step it (re)started at, so `(0,)` and call 0 are a new
    run's first evaluation."""
    return seeding.env_seeds(seed, episodes, "eval", *stream, call)


class Evaluator:
    """Runs `episodes` episodes in lock-step, each for at most `max_steps` steps,
    acting as `actions` says; reuses its envs between calls. Evaluation k resets its
    envs with the stream `("eval", *stream, k)` of the run's seed; a training run's
    `stream` is the env step it (re)started at."""

    deferred = False  # results are ready as soon as `submit` returns

    def __init__(
        self,
        env_fn: Callable[[], gym.Env],
        episodes: int,
        seed: int,
        stream: tuple[int, ...] = (),
        max_steps: int = DEFAULT_EPISODE_CAP,
        actions: EvalActions = "greedy",
        epsilon: float = 0.0,
        seeds: Sequence[int] = (),
    ) -> None:
        """`epsilon`: a Q-policy's, when its actions are sampled. `seeds`: a
        population's (`models.population`: several agents, `--seeds`), each agent's
        run seed in order; each agent then plays `episodes` episodes of its own, reset
        and drawn from its seed's streams as its run alone would (the envs of agent i
        are the i-th block), and `seed` is unused."""
        self.seeds = list(seeds) or [seed]
        self.agents = len(self.seeds)
        self.per_agent, self.max_steps = episodes, max_steps
        self.episodes = episodes * self.agents
        self.seed, self.stream = self.seeds[0], stream
        self.mode: Mode = actions
        draws = [action_draws(actions, s, stream, epsilon) for s in self.seeds]
        self.draws = draws[0] if self.agents == 1 else PopulationDraws(draws)
        self.calls = 0
        self.envs = SerialVectorEnv([env_fn] * self.episodes)
        self._result: Episodes | None = None
        self.progress: ProgressFn | None = None  # told how far a running evaluation is

    def run(self, policy: Policy, progress: ProgressFn | None = None) -> Episodes:
        """One episode per env (undiscounted true env reward), `policy` acting through
        its one acting call, greedy or sampled as this evaluator says; `progress` is
        told how far it is every `PROGRESS_EVERY_S` seconds."""
        seeds = [
            reset
            for seed in self.seeds
            for reset in eval_seeds(seed, self.per_agent, self.stream, self.calls)
        ]
        obs, infos = self.envs.reset(seed=seeds)
        mask = batch_mask(infos)
        self.calls += 1
        returns = np.zeros(self.episodes)
        lengths = np.zeros(self.episodes, np.int64)
        truncated = np.zeros(self.episodes, bool)
        running = np.ones(self.episodes, dtype=bool)
        state, first = policy.initial_state(self.episodes), starts(self.episodes)
        none_starts = np.zeros(self.episodes, bool)  # one episode per env: none starts again
        next_report = time.monotonic() + PROGRESS_EVERY_S
        for step in range(1, self.max_steps + 1):
            acted = policy.act(obs, state, first, self.mode, self.draws, mask)
            state = acted.state
            obs, reward, term, trunc, infos = self.envs.step(acted.action)
            mask, first = batch_mask(infos), none_starts
            returns += np.where(running, reward, 0.0)
            lengths += running
            truncated |= running & trunc & ~term
            running &= ~(term | trunc)
            if not running.any():
                break
            if progress is not None and time.monotonic() >= next_report:
                next_report = time.monotonic() + PROGRESS_EVERY_S
                done = self.episodes - int(running.sum())
                progress(Progress(done, self.episodes, step, self.max_steps))
        # still running after the cap: cut there
        return Episodes(returns, lengths, truncated | running, running.copy(), self.max_steps)

    @property
    def busy(self) -> bool:
        return False

    def submit(self, policy: Policy) -> None:
        self._result = self.run(policy, self.progress)

    def poll(self, timeout: float = 0.0) -> Episodes | None:
        """The episodes of the last `submit`, once (None if already taken)."""
        del timeout
        result, self._result = self._result, None
        return result

    def close(self) -> None:
        self.envs.close()
