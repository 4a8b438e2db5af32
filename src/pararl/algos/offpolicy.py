"""What the off-policy learners (DQN, SAC, TD3) share between their replay memory and
their gradient step: when a batch may be learned from, how many updates the replay
ratio allows, and one update on a batch drawn uniformly or in proportion to
priority (importance-weighted, its priorities then set to its new TD errors); and
`ReplayState`, the part of every off-policy run's state these make up."""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import torch

from pararl.checkpoint import Header
from pararl.replay.make import Replay
from pararl.replay.nstep import Transitions
from pararl.replay.prioritized import PrioritizedReplay


def can_learn(replay: Replay, batch_size: int, learning_starts: int) -> bool:
    """A batch is there, and `learning_starts` transitions went into this memory
    (counted as added, not as held: a frame memory as large as `learning_starts`,
    rl-zoo's Atari setting, never holds that many, its episode ends taking slots)."""
    return len(replay) >= batch_size and replay.added >= learning_starts


def updates_due(
    replay_ratio: float, learning_starts: int, env_steps: int, updates: int, ready: bool
) -> int:
    """Gradient updates the replay ratio allows now, beyond the `updates` done; the
    ratio counts env steps after `learning_starts`. Ratio 0 (async only): one at a
    time, always (the learner learns all the time)."""
    if not ready:
        return 0
    if replay_ratio == 0:
        return 1
    allowed = int(replay_ratio * (env_steps - learning_starts))
    return max(0, allowed - updates)


def importance_beta(start: float, env_steps: int, budget: int) -> float:
    """Prioritized replay's importance-sampling exponent: `start` annealed linearly
    to 1 over the step budget."""
    frac = min(1.0, env_steps / budget)
    return start + frac * (1.0 - start)


class Learner(Protocol):
    """An off-policy learner: one gradient step on a batch, and its counters."""

    updates: int
    device: torch.device

    def update(
        self, batch: Transitions, weights: np.ndarray | None
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """(the step's statistics, each sample's TD error)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


L = TypeVar("L", bound=Learner)


class ReplayState(Generic[L]):
    """The replay half of an off-policy run's state: its memory and the stream its
    batches are drawn from, the env steps and wall time so far, and the update the
    replay ratio schedules. A subclass sets these attributes and its `learner`
    (`Learner`), and names its checkpoint (`ALGO`)."""

    ALGO = ""  # the checkpoint header's algorithm name
    config: Any  # RunConfig with the replay fields (priority_beta, prioritized, ...)
    settings: Any  # the kind-dependent fields (batch_size, learning_starts, replay_ratio)
    learner: L
    replay: Replay
    replay_rng: np.random.Generator
    env_steps: int = 0
    wall_s: float = 0.0

    def can_learn(self) -> bool:
        """A batch is there, and `learning_starts` transitions went into this memory."""
        s = self.settings
        return can_learn(self.replay, s.batch_size, s.learning_starts)

    def updates_due(self) -> int:
        """Gradient updates the replay ratio allows now, beyond those done."""
        s = self.settings
        return updates_due(
            s.replay_ratio,
            s.learning_starts,
            self.env_steps,
            self.learner.updates,
            self.can_learn(),
        )

    def beta(self) -> float:
        """Importance-sampling exponent: `priority_beta` annealed to 1 over the budget."""
        return importance_beta(self.config.priority_beta, self.env_steps, self.config.budget)

    def update(self) -> dict[str, torch.Tensor]:
        """One gradient update on a replay batch: uniform, or prioritized (weighted by
        importance, and the batch's priorities set to its new TD errors)."""
        size = self.settings.batch_size
        if not isinstance(self.replay, PrioritizedReplay):
            stats, _ = self.learner.update(self.replay.sample(size, self.replay_rng), None)
            return stats
        sample = self.replay.sample_prioritized(size, self.replay_rng, self.beta())
        stats, td_error = self.learner.update(sample.batch, sample.weights)
        self.replay.update_priorities(sample.slots, td_error.cpu().numpy())
        return stats

    def described(self) -> dict[str, Any]:
        """What a checkpoint says of the networks beyond their weights (shapes,
        bounds), for loading its policy alone."""
        return {}

    def state(self, with_replay: bool = True, wall_s: float = 0.0) -> dict[str, Any]:
        """The checkpoint: header, learner, replay memory (or None), description."""
        return {
            **Header(self.ALGO, 1, self.env_steps, wall_s).as_dict(),
            "learner": self.learner.state_dict(),
            "replay": self.replay.state_dict() if with_replay else None,
            **self.described(),
        }

    def load(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state["learner"])
        if state.get("replay") is not None:
            self.replay.load_state_dict(state["replay"])
        header = Header.of(state)
        self.env_steps, self.wall_s = header.env_steps, header.wall_s


__all__ = [
    "Learner",
    "ReplayState",
    "can_learn",
    "importance_beta",
    "updates_due",
]
